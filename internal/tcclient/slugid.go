package tcclient

import (
	"encoding/base64"

	"github.com/google/uuid"
)

// NewTaskID returns a fresh "nice" slugid (a v4 UUID in URL-safe base64
// without padding, first bit cleared so it never starts with "-"), the form
// Taskcluster uses for task and task-group ids.
func NewTaskID() string {
	u := uuid.New()
	u[0] &= 0x7f
	return base64.RawURLEncoding.EncodeToString(u[:])
}
