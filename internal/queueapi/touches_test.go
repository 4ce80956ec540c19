package queueapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// TestFlushWritesQueuedWorkerRecords: a claim's bookkeeping (the worker
// seen, the run it claimed) waits up to a second to be written with
// others'; Flush, which a stopping server calls before its store closes,
// writes it at once. Read straight from the store: the API's own worker
// reads flush first and would hide a missing Flush.
func TestFlushWritesQueuedWorkerRecords(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	tq := "prov-flush/wt"
	taskID := newTaskID()
	h.createTask(t, taskID, h.taskDef(tq, nil))
	claims := h.claimWork(t, tq, 1)
	require.Len(t, claims, 1)

	ctx := context.Background()
	require.NoError(t, h.srv.Flush(ctx))
	w, err := h.store.GetWorker(ctx, store.WorkerKey{TaskQueueID: tq, WorkerGroup: "wg", WorkerID: "w1"}, h.clock.Now())
	require.NoError(t, err, "the worker's record was not written by Flush")
	require.Equal(t, []store.RecentTask{{TaskID: taskID, RunID: 0}}, w.RecentTasks)
	require.True(t, w.LastDateActive.Equal(h.clock.Now()), "lastDateActive %s, want the claim's time %s", w.LastDateActive, h.clock.Now())

	// Nothing left: a second flush writes nothing and succeeds.
	require.NoError(t, h.srv.Flush(ctx))
}
