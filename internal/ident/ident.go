// Package ident holds the patterns of Taskcluster's names: task and
// task-group ids (v4 slugids, slugid.go), provisioner ids, worker groups
// and ids (identifiers), worker types, and task queue ids
// (docs/contract/queue.md §1.2). It is a leaf shared by both sides of the
// HTTP line, so each pattern is written once; its text is part of error
// messages callers match on.
package ident

import (
	"regexp"
	"strings"
)

var (
	identifier  = regexp.MustCompile(`^[a-zA-Z0-9-_]{1,38}$`)
	workerType  = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,36}[a-z0-9])?$`)
	taskQueueID = regexp.MustCompile(`^[a-zA-Z0-9-_]{1,38}/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$`)
)

// Identifier is the pattern of a provisionerId, workerGroup or workerId
// (and of a workerType as a URL parameter of the older routes). Callers
// must not modify it.
func Identifier() *regexp.Regexp { return identifier }

// WorkerType is the pattern of the workerType half of a task queue id.
func WorkerType() *regexp.Regexp { return workerType }

// TaskQueueID is the pattern of "<provisionerId>/<workerType>".
func TaskQueueID() *regexp.Regexp { return taskQueueID }

// ValidTaskQueueID reports whether id is a well-formed task queue id.
func ValidTaskQueueID(id string) bool { return taskQueueID.MatchString(id) }

// SplitTaskQueueID splits a well-formed task queue id; ok is false for
// any other string.
func SplitTaskQueueID(id string) (provisionerID, workerType string, ok bool) {
	if !ValidTaskQueueID(id) {
		return "", "", false
	}
	provisionerID, workerType, _ = strings.Cut(id, "/")
	return provisionerID, workerType, true
}
