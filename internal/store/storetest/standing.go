package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// testWorkerStanding: a claim reads the worker's standing in its first
// round trip. claimWork (CheckStopped) claims nothing for a worker its
// pool's manager stopped, and says so; UpdateTask (Standing) reads a
// named worker's standing and quarantine, or the standing of a run's
// holder, before Apply runs; a worker no pool knows is not stopped.
func testWorkerStanding(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch
	claim := func(workerID string) *store.ClaimResult {
		res, err := e.s.ClaimWork(e.ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: workerID,
			Count: 1, Now: now, TakenUntil: now.Add(time.Minute), CheckQuarantine: true, CheckStopped: true})
		require.NoError(t, err)
		return res
	}
	e.create("aaaaaaaaQaaaaaaaaaaaaA", now)
	_, err := e.s.CreatePoolWorker(e.ctx, newPoolWorker(testQueue, "g", "gone", workermanager.StateStopping))
	require.NoError(t, err)
	_, err = e.s.CreatePoolWorker(e.ctx, newPoolWorker(testQueue, "g", "busy", workermanager.StateRunning))
	require.NoError(t, err)

	res := claim("gone")
	require.True(t, res.WorkerStopped)
	require.Empty(t, res.Claims, "nothing claimed for a stopped worker")
	res = claim("busy")
	require.False(t, res.WorkerStopped)
	require.Len(t, res.Claims, 1, "a running pool worker claims")

	// The holder of run 0 (busy) is stopped after its claim: a reclaim's
	// update reads it with the task.
	_, err = e.s.UpdatePoolWorker(e.ctx, workermanager.Key{WorkerPoolID: testQueue, WorkerGroup: "g", WorkerID: "busy"}, func(w *workermanager.Worker) error {
		w.Stopped(now)
		return nil
	})
	require.NoError(t, err)
	read := func(standing *store.WorkerStanding) *store.WorkerStanding {
		var seen *store.WorkerStanding
		_, err := e.s.UpdateTask(e.ctx, store.UpdateTaskParams{TaskID: "aaaaaaaaQaaaaaaaaaaaaA", Now: now, Standing: standing,
			Apply: func(*queue.TaskState, *queue.Transition) error {
				copied := *standing
				seen = &copied
				return nil
			}})
		require.NoError(t, err)
		return seen
	}
	require.True(t, read(&store.WorkerStanding{RunID: 0}).Stopped, "the run's holder was stopped")
	require.False(t, read(&store.WorkerStanding{RunID: 7}).Stopped, "no such run: no holder")
	named := read(&store.WorkerStanding{Worker: store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "stranger"}})
	require.False(t, named.Stopped, "a worker no pool knows is not stopped")
	require.True(t, named.QuarantinedUntil.IsZero())
	require.True(t, read(&store.WorkerStanding{Worker: store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "gone"}}).Stopped)
}
