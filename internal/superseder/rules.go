package superseder

import (
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// RoutePrefix is the task-route prefix by which tasks opt in to the built-in
// superseder: a task with route "coalesce.v1.<key>" is a candidate of lists
// for <key>.
const RoutePrefix = "coalesce.v1."

// DefaultMaxTasks is how many entries a built-in list holds at most (the
// worker's default superseding.maxTasks).
const DefaultMaxTasks = 32

// Arrival is when the task's current run was queued (its creation time if
// it has no run).
func Arrival(t *queue.TaskState) time.Time {
	if r := t.LastRun(); r != nil {
		return r.Scheduled.Time
	}
	return t.Task.Created.Time
}

// Candidate is one task a built-in list may contain.
type Candidate struct {
	// TaskID identifies the task.
	TaskID string
	// Created is the task's creation time (the list order).
	Created time.Time
	// Arrived is when its current run was queued (the age threshold).
	Arrived time.Time
}

// Select applies the built-in superseder's rule to the candidates (the
// requester and the pending same-key tasks of its queue): when more than
// size of them exist AND the earliest arrival lies more than age before
// now, it answers them ascending by creation (ties by taskId), keeping the
// requester and the newest maxTasks−1 others; otherwise it answers nothing
// (ok false).
func Select(entries []Candidate, requester string, now time.Time, age time.Duration, size, maxTasks int) ([]string, bool) {
	if len(entries) == 0 || len(entries) <= size {
		return nil, false
	}
	oldest := entries[0].Arrived
	for _, e := range entries[1:] {
		if e.Arrived.Before(oldest) {
			oldest = e.Arrived
		}
	}
	if now.Sub(oldest) <= age {
		return nil, false
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Candidate) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.TaskID, b.TaskID)
	})
	// Keep the newest maxTasks−1 others plus the requester, in order.
	keepOthers := max(maxTasks-1, 0)
	var out []string
	for i := len(sorted) - 1; i >= 0; i-- {
		if sorted[i].TaskID == requester {
			out = append(out, sorted[i].TaskID)
			continue
		}
		if keepOthers > 0 {
			out = append(out, sorted[i].TaskID)
			keepOthers--
		}
	}
	slices.Reverse(out)
	return out, true
}
