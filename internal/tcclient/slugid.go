package tcclient

import "github.com/hopper-ci/hopper/internal/ident"

// NewTaskID returns a fresh "nice" slugid (a v4 UUID in URL-safe base64
// without padding, first bit cleared so it never starts with "-"), the form
// Taskcluster uses for task and task-group ids.
func NewTaskID() string { return ident.NewSlugID() }
