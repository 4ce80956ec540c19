package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// ChangeRecorder keeps the changes it is handed, as the publisher of a
// duty under test (maintenance's, the worker pools'): the tests read
// back which events were published.
type ChangeRecorder struct {
	mu      sync.Mutex
	changes []store.Change
}

// Publish keeps changes.
func (r *ChangeRecorder) Publish(_ context.Context, changes []store.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, changes...)
	r.mu.Unlock()
}

// Events lists "<taskId> <kind>" of every event published, or only of
// the named tasks.
func (r *ChangeRecorder) Events(taskIDs ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.changes {
		if len(taskIDs) > 0 && !slices.Contains(taskIDs, c.Task.TaskID) {
			continue
		}
		for _, e := range c.Events {
			out = append(out, c.Task.TaskID+" "+e.Kind)
		}
	}
	return out
}

// CreateClaimed creates a task of taskQueueID at now and claims its run 0
// until now + claimFor, as worker g/w.
func CreateClaimed(t testing.TB, s store.Store, taskQueueID, taskID string, now time.Time, claimFor time.Duration) {
	t.Helper()
	ctx := context.Background()
	_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: taskID, Task: NewTask(taskQueueID, now), Now: now})
	require.NoError(t, err)
	res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: taskQueueID, WorkerGroup: "g", WorkerID: "w",
		Count: 1, Now: now, TakenUntil: now.Add(claimFor)})
	require.NoError(t, err)
	require.Len(t, res.Claims, 1)
}
