// Package queue is hopper's domain: task definitions, task status and runs,
// and the rules that move a task through its life-cycle (Taskcluster's
// unscheduled → pending → running → completed/failed/exception, with retries,
// reruns, cancellation, claim expiry and deadlines).
//
// It is plain Go over plain structs. It performs no I/O and reads no clock:
// every transition takes the current time as an argument, so the store and
// the HTTP layer call into it and tests drive it with any time they like.
package queue

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// Limits and constants of the task life-cycle (docs/contract/queue.md §2, §7).
const (
	MaxRuns                     = 50
	MaxRetries                  = 49
	DefaultRetries              = 5
	MaxDependencies             = 10000
	MaxDeadline                 = 5 * 24 * time.Hour
	CreatedDrift                = 15 * time.Minute
	ArtifactGraceAfterException = 25 * time.Minute
	TaskGroupExpiresExtension   = time.Hour
)

// Requires values.
const (
	RequiresAllCompleted = "all-completed"
	RequiresAllResolved  = "all-resolved"
)

// Priorities from highest to lowest.
var priorityOrder = []string{"highest", "very-high", "high", "medium", "low", "very-low", "lowest"}

// PriorityWeight maps a priority name to its ordering weight (7 = highest,
// 1 = lowest). The legacy name "normal" weighs as "lowest"; unknown names
// weigh 0.
func PriorityWeight(p string) int {
	if p == "normal" {
		return 1
	}
	for i, name := range priorityOrder {
		if name == p {
			return len(priorityOrder) - i
		}
	}
	return 0
}

// PrioritiesAtOrAbove lists p and every higher priority, highest first: a
// caller may create a task at priority p with a create-task scope for any of
// them.
func PrioritiesAtOrAbove(p string) []string {
	w := PriorityWeight(p)
	var out []string
	for _, name := range priorityOrder {
		if PriorityWeight(name) >= w {
			out = append(out, name)
		}
	}
	return out
}

// Metadata is the human description every task carries.
type Metadata struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Owner       string `json:"owner"`
	Source      string `json:"source"`
}

// Task is a task definition as stored and as returned by the task endpoint:
// defaults filled in and dates canonical.
type Task struct {
	ProvisionerID string            `json:"provisionerId"`
	WorkerType    string            `json:"workerType"`
	TaskQueueID   string            `json:"taskQueueId"`
	SchedulerID   string            `json:"schedulerId"`
	ProjectID     string            `json:"projectId"`
	TaskGroupID   string            `json:"taskGroupId"`
	Dependencies  []string          `json:"dependencies"`
	Requires      string            `json:"requires"`
	Routes        []string          `json:"routes"`
	Priority      string            `json:"priority"`
	Retries       int               `json:"retries"`
	Created       Time              `json:"created"`
	Deadline      Time              `json:"deadline"`
	Expires       Time              `json:"expires"`
	Scopes        []string          `json:"scopes"`
	Payload       json.RawMessage   `json:"payload"`
	Metadata      Metadata          `json:"metadata"`
	Tags          map[string]string `json:"tags"`
	Extra         json.RawMessage   `json:"extra"`

	// Flow is the policy of Extra's flow block (ParseFlow), parsed once,
	// by createTask when the task is made: the store keeps it in the
	// task's row beside the definition and reads it back from there, never
	// parsing the block again. Not part of the definition's JSON.
	Flow *FlowPolicy `json:"-"`
}

// SplitTaskQueueID splits "provisionerId/workerType".
func SplitTaskQueueID(id string) (provisionerID, workerType string) {
	p, w, _ := strings.Cut(id, "/")
	return p, w
}

// SameDefinition reports whether two definitions are equal in the sense of
// createTask idempotency (docs/contract/queue.md §3.5): every field compared, arrays in
// order, JSON values structurally, timestamps at millisecond precision.
func SameDefinition(a, b *Task) bool {
	if a.TaskQueueID != b.TaskQueueID || a.SchedulerID != b.SchedulerID ||
		a.ProjectID != b.ProjectID || a.TaskGroupID != b.TaskGroupID ||
		a.Requires != b.Requires || a.Priority != b.Priority || a.Retries != b.Retries ||
		a.Created.Millis() != b.Created.Millis() || a.Deadline.Millis() != b.Deadline.Millis() ||
		a.Expires.Millis() != b.Expires.Millis() || a.Metadata != b.Metadata {
		return false
	}
	if !sameStrings(a.Dependencies, b.Dependencies) || !sameStrings(a.Routes, b.Routes) ||
		!sameStrings(a.Scopes, b.Scopes) {
		return false
	}
	if len(a.Tags) != len(b.Tags) {
		return false
	}
	for k, v := range a.Tags {
		if bv, ok := b.Tags[k]; !ok || bv != v {
			return false
		}
	}
	return sameJSON(a.Payload, b.Payload) && sameJSON(a.Extra, b.Extra)
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	var av, bv any
	if len(a) == 0 {
		a = json.RawMessage("{}")
	}
	if len(b) == 0 {
		b = json.RawMessage("{}")
	}
	if json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil {
		return false
	}
	return reflect.DeepEqual(av, bv)
}
