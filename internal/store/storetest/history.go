package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// historyTask is what testListTasks knows of a task it made.
type historyTask struct {
	id, state, queue, group, name string
	created                       time.Time
}

// makeHistory creates n tasks, a minute apart, in every state, two queues,
// two groups and names of two kinds, and returns what it made.
func (e *env) makeHistory(n int) []historyTask {
	e.t.Helper()
	states := []string{queue.StateUnscheduled, queue.StatePending, queue.StateRunning,
		queue.StateCompleted, queue.StateFailed, queue.StateException}
	var made []historyTask
	for i := range n {
		h := historyTask{
			id:      fmt.Sprintf("history%02dAAAAAAAAAAAAA", i),
			state:   states[i%len(states)],
			queue:   testQueue,
			group:   "historyGroupAAAAAAAAAA",
			name:    fmt.Sprintf("test shard %d", i),
			created: Epoch.Add(time.Duration(i) * time.Minute),
		}
		if i%2 == 1 {
			h.queue = "prov/other"
		}
		if i >= n/2 {
			h.group = "historyGroupBBBBBBBBBB"
		}
		if i%3 == 0 {
			h.name = fmt.Sprintf("Build linux_%d%%", i)
		}
		mutate := []func(*queue.Task){withQueue(h.queue), withGroup(h.group),
			func(t *queue.Task) { t.Metadata.Name = h.name }}
		if h.state == queue.StateUnscheduled {
			mutate = append(mutate, withDeps(h.id))
		}
		e.create(h.id, h.created, mutate...)
		if h.state != queue.StateUnscheduled && h.state != queue.StatePending {
			e.claim(h.id, h.created)
		}
		switch h.state {
		case queue.StateCompleted, queue.StateFailed:
			e.mustApply(h.id, h.created, report(h.state, 0, h.created))
		case queue.StateException:
			e.mustApply(h.id, h.created, report(queue.ReasonMalformedPayload, 0, h.created))
		}
		made = append(made, h)
	}
	return made
}

// testListTasks checks ListTasks against a plain filter of the tasks it
// made: every filter alone and combined, newest first, paged.
func testListTasks(t *testing.T, open Opener) {
	e := setup(t, open)
	made := e.makeHistory(24)
	want := func(f store.TaskFilter) []string {
		ids := []string{}
		for _, h := range slices.Backward(made) { // newest first
			if (f.State == "" || h.state == f.State) && (f.TaskQueueID == "" || h.queue == f.TaskQueueID) &&
				(f.TaskGroupID == "" || h.group == f.TaskGroupID) &&
				(f.Name == "" || strings.Contains(strings.ToLower(h.name), strings.ToLower(f.Name))) &&
				(f.CreatedFrom.IsZero() || !h.created.Before(f.CreatedFrom)) && (f.CreatedTo.IsZero() || h.created.Before(f.CreatedTo)) {
				ids = append(ids, h.id)
			}
		}
		return ids
	}
	list := func(f store.TaskFilter, limit int) []string {
		t.Helper()
		ids := []string{}
		page := store.Page{Limit: limit}
		for range 100 {
			got, next, err := e.s.ListTasks(e.ctx, f, page)
			require.NoError(t, err)
			require.LessOrEqual(t, len(got), limit)
			for _, h := range got {
				ids = append(ids, h.TaskID)
				require.Equal(t, made[slices.IndexFunc(made, func(m historyTask) bool { return m.id == h.TaskID })].state, h.State())
			}
			if next == "" {
				return ids
			}
			page.ContinuationToken = next
		}
		t.Fatal("no end of pages")
		return nil
	}
	var filters []store.TaskFilter
	for _, state := range []string{"", queue.StateUnscheduled, queue.StatePending, queue.StateRunning,
		queue.StateCompleted, queue.StateFailed, queue.StateException} {
		for _, q := range []string{"", "prov/other"} {
			filters = append(filters,
				store.TaskFilter{State: state, TaskQueueID: q},
				store.TaskFilter{State: state, TaskQueueID: q, TaskGroupID: "historyGroupBBBBBBBBBB"},
				store.TaskFilter{State: state, TaskQueueID: q, Name: "build LINUX"},
				store.TaskFilter{State: state, TaskQueueID: q, CreatedFrom: Epoch.Add(5 * time.Minute), CreatedTo: Epoch.Add(17 * time.Minute)})
		}
	}
	filters = append(filters,
		store.TaskFilter{Name: "_1"}, // LIKE's wildcards are literal
		store.TaskFilter{Name: "2%"},
		store.TaskFilter{Name: "no such"},
		store.TaskFilter{TaskGroupID: "historyGroupAAAAAAAAAA", CreatedFrom: Epoch.Add(3 * time.Minute)})
	for _, f := range filters {
		for _, limit := range []int{1, 5, 1000} {
			require.Equal(t, want(f), list(f, limit), "filter %+v, pages of %d", f, limit)
		}
	}
	require.Len(t, list(store.TaskFilter{State: queue.StateFailed}, 2), 4, "failed tasks are found")

	// A rerun failed task is pending again, and listed so.
	failed := made[4]
	require.Equal(t, queue.StateFailed, failed.state)
	e.mustApply(failed.id, failed.created.Add(30*time.Minute), rerun(failed.created.Add(30*time.Minute)))
	made[4].state = queue.StatePending
	require.NotContains(t, list(store.TaskFilter{State: queue.StateFailed}, 10), failed.id)
	require.Contains(t, list(store.TaskFilter{State: queue.StatePending}, 10), failed.id)

	_, _, err := e.s.ListTasks(e.ctx, store.TaskFilter{}, store.Page{ContinuationToken: "!!"})
	require.ErrorIs(t, err, store.ErrBadContinuationToken)
}
