package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// testClaimAtCreate: a claimWork call waiting armed on a queue the store
// knows drained has the next task created there claimed for it in the
// create's own transaction (store/direct.go), and is woken to take it; the
// creator's result carries the events in order (defined, pending,
// running). A call not armed, a queue with runs waiting, or a quarantined
// worker gets no such claim, and the task is created pending as before.
func testClaimAtCreate(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	claimFor := func(worker string) *store.Claimant {
		return &store.Claimant{WorkerGroup: workerGroup, WorkerID: worker, ClaimTimeout: claimTimeout}
	}
	claim := func(worker string, woken bool) *store.ClaimResult {
		t.Helper()
		res, err := e.s.ClaimWork(e.ctx, store.ClaimWorkParams{
			TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: worker, Count: 8,
			Now: now, TakenUntil: now.Add(claimTimeout), CheckQuarantine: true, SkipKnownEmpty: true, Woken: woken,
		})
		require.NoError(t, err)
		return res
	}
	woken := func(w *store.Waiting) bool {
		select {
		case <-w.C:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}

	w1 := hubOf(e.s).WaitForWork(testQueue, 2, claimFor("w1"), nil)
	defer w1.Leave()
	require.Empty(t, claim("w1", false).Claims, "the queue is drained")
	e.create("before-arming", Epoch)
	require.True(t, woken(w1), "an unarmed waiter is woken as before")
	require.Nil(t, w1.Claimed(), "nothing is claimed for a waiter that is not armed")
	require.Len(t, claim("w1", true).Claims, 1)
	require.Empty(t, claim("w1", false).Claims, "drained again")

	w1.Arm()
	res := e.create("direct", Epoch)
	require.Equal(t, queue.StatePending, res.Task.State(), "the creator is answered with the task as created")
	require.Equal(t, []string{queue.EventTaskDefined, queue.EventTaskPending, queue.EventTaskRunning}, eventKinds(res.Changes, "direct"))
	requireStatusFilled(t, res.Changes)
	require.True(t, woken(w1), "the waiter is woken to take its claim")
	got := w1.Claimed()
	require.NotNil(t, got)
	require.Len(t, got.Claims, 1)
	require.Empty(t, got.Changes, "the creator publishes the claim's events")
	require.Nil(t, w1.Claimed(), "a claim is taken once")
	cl := got.Claims[0]
	require.Equal(t, "direct", cl.Task.TaskID)
	require.Equal(t, 0, cl.RunID)
	require.Equal(t, queue.StateRunning, cl.Task.State())
	stored := e.get("direct")
	require.Equal(t, queue.StateRunning, stored.State())
	require.Equal(t, "w1", stored.Runs[0].WorkerID)
	require.Equal(t, Epoch.Add(claimTimeout).UnixMilli(), stored.Runs[0].TakenUntil.Millis())
	require.Empty(t, claim("w2", false).Claims, "a run claimed at create is not pending")

	// Woken, the waiter is disarmed: the next task is pending, and while
	// it waits even an armed waiter gets nothing claimed at create (it
	// would go ahead of an older run).
	e.create("pending-1", Epoch)
	w1.Arm()
	e.create("pending-2", Epoch)
	require.Nil(t, w1.Claimed())
	res2 := claim("w1", true)
	require.Equal(t, []string{"pending-1", "pending-2"}, []string{res2.Claims[0].Task.TaskID, res2.Claims[1].Task.TaskID})
	require.True(t, woken(w1), "the wake-up for pending-1, which the claim took")

	// A quarantined worker is not claimed for: the task is created
	// pending, and the waiter claims for itself from then on.
	w2 := hubOf(e.s).WaitForWork(testQueue, 1, claimFor("w2"), nil)
	defer w2.Leave()
	key := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: "w2"}
	_, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: key, Now: now, Expires: now.Add(time.Hour)})
	require.NoError(t, err)
	_, err = e.s.QuarantineWorker(e.ctx, store.QuarantineWorkerParams{Key: key, Now: now, QuarantineUntil: now.Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, claim("w1", false).Claims)
	require.Nil(t, w1.Leave())
	w2.Arm()
	e.create("quarantined", Epoch)
	require.Equal(t, queue.StatePending, e.get("quarantined").State())
	require.True(t, woken(w2), "woken as before, to find itself quarantined")
	require.Nil(t, w2.Claimed())
	require.False(t, claim("w2", true).QuarantinedUntil.IsZero())

	// A waiter leaving after its claim was made gets it from Leave.
	require.Len(t, claim("w3", false).Claims, 1) // the quarantined task
	w3 := hubOf(e.s).WaitForWork(testQueue, 1, claimFor("w3"), nil)
	require.Empty(t, claim("w3", false).Claims)
	w3.Arm()
	e.create("left", Epoch)
	left := w3.Leave()
	require.NotNil(t, left, "claims made for a call are returned when it leaves")
	require.Equal(t, "left", left.Claims[0].Task.TaskID)
	require.Nil(t, w3.Leave())

	pending, claimed := e.counts(now)
	require.Equal(t, 0, pending)
	require.Equal(t, 6, claimed)
}
