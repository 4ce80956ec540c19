package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// testWorkerCapacity: a worker's record keeps the most tasks it asked for
// in one claimWork, through both ways of touching it (TouchWorker and
// TouchMany); an ask of 0 (a reclaim) keeps it; a worker coming back after
// WorkerCapacityAbsence takes what it asks then; of a key given twice in
// one batch, the larger ask is kept beside the later time.
func testWorkerCapacity(t *testing.T, open Opener) {
	for _, batched := range []bool{false, true} {
		t.Run(map[bool]string{false: "TouchWorker", true: "TouchMany"}[batched], func(t *testing.T) {
			e := setup(t, open)
			key := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "w"}
			touch := func(at time.Time, asked ...int) {
				t.Helper()
				var ps []store.TouchWorkerParams
				for _, n := range asked {
					ps = append(ps, store.TouchWorkerParams{Key: key, Now: at, Expires: at.Add(24 * time.Hour), Capacity: n})
				}
				if batched {
					require.NoError(t, e.s.TouchMany(e.ctx, nil, ps, nil))
					return
				}
				for _, p := range ps {
					_, err := e.s.TouchWorker(e.ctx, p)
					require.NoError(t, err)
				}
			}
			capacity := func(at time.Time) int {
				t.Helper()
				w, err := e.s.GetWorker(e.ctx, key, at)
				require.NoError(t, err)
				return w.Capacity
			}
			now := Epoch
			touch(now, 0)
			require.Equal(t, 0, capacity(now), "a record made by a reclaim or a declaration knows no capacity")
			touch(now, 4)
			require.Equal(t, 4, capacity(now))
			now = now.Add(time.Minute)
			touch(now, 1)
			require.Equal(t, 4, capacity(now), "an ask for fewer (some slots busy) keeps the most asked")
			now = now.Add(50 * time.Minute)
			touch(now, 0)
			require.Equal(t, 4, capacity(now), "a reclaim keeps it")
			now = now.Add(50 * time.Minute)
			touch(now, 2)
			require.Equal(t, 4, capacity(now), "seen 50 minutes before: the same worker")
			now = now.Add(store.WorkerCapacityAbsence + time.Millisecond)
			touch(now, 2)
			require.Equal(t, 2, capacity(now), "back after an absence, with fewer slots")
			now = now.Add(time.Minute)
			touch(now, 3, 0)
			require.Equal(t, 3, capacity(now), "the larger of two asks in one batch")
		})
	}
}

// testListWorkersSeen lists the workers seen since a time, with their
// capacity, across task queues.
func testListWorkersSeen(t *testing.T, open Opener) {
	e := setup(t, open)
	touch := func(q, id string, at time.Time, asked int) {
		_, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: store.WorkerKey{TaskQueueID: q, WorkerGroup: "g", WorkerID: id},
			Now: at, Expires: at.Add(24 * time.Hour), Capacity: asked})
		require.NoError(t, err)
	}
	touch(testQueue, "a", Epoch, 2)
	touch(testQueue, "b", Epoch.Add(-time.Hour), 1)
	touch("prov/other", "a", Epoch.Add(-time.Second), 0)
	touch("prov/quiet", "a", Epoch.Add(-2*time.Minute), 1)
	seen, err := e.s.ListWorkersSeen(e.ctx, Epoch.Add(-90*time.Second))
	require.NoError(t, err)
	slices.SortFunc(seen, func(a, b store.WorkerSeen) int { return compareKeys(a.WorkerKey, b.WorkerKey) })
	require.Equal(t, []store.WorkerSeen{
		{WorkerKey: store.WorkerKey{TaskQueueID: "prov/other", WorkerGroup: "g", WorkerID: "a"}, LastDateActive: Epoch.Add(-time.Second)},
		{WorkerKey: store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "a"}, LastDateActive: Epoch, Capacity: 2},
	}, seen)
}

func compareKeys(a, b store.WorkerKey) int {
	for _, c := range [][2]string{{a.TaskQueueID, b.TaskQueueID}, {a.WorkerGroup, b.WorkerGroup}, {a.WorkerID, b.WorkerID}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// testListHeldRuns: the runs workers hold are those running whose claims
// last; a run whose claim ran out, a resolved run and a worker's earlier
// run of a task now held by another are not; a worker's own runs are
// told apart from those of workers whose ids its id would match as a
// LIKE pattern ('_' matches any character).
func testListHeldRuns(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch
	claimAs := func(taskID, worker string, at time.Time, claimFor time.Duration) {
		t.Helper()
		e.mustApply(taskID, at, func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.Claim(len(ts.Runs)-1, "g", worker, at, at.Add(claimFor), tr)
		})
	}
	for _, id := range []string{"heldA", "heldUnder", "heldX", "lapsed", "done", "retried"} {
		e.create(id, now)
	}
	e.create("otherQueue", now, withQueue("prov/other"))
	claimAs("heldA", "a_b", now, claimTimeout)
	claimAs("heldUnder", "a_b", now, claimTimeout)
	claimAs("heldX", "aXb", now, claimTimeout)
	claimAs("lapsed", "a_b", now.Add(-claimTimeout), time.Minute)
	claimAs("done", "a_b", now, claimTimeout)
	e.mustApply("done", now, report(queue.StateCompleted, 0, now))
	// An earlier run of "retried" was a_b's; aXb holds the retry.
	claimAs("retried", "a_b", now, claimTimeout)
	e.mustApply("retried", now, report(queue.ReasonWorkerShutdown, 0, now))
	claimAs("retried", "aXb", now, claimTimeout)
	claimAs("otherQueue", "a_b", now, claimTimeout)

	held := func(q store.HeldRunsQuery) []string {
		t.Helper()
		runs, err := e.s.ListHeldRuns(e.ctx, q, now.Add(time.Second))
		require.NoError(t, err)
		var out []string
		for _, r := range runs {
			require.True(t, r.TakenUntil.After(now), "%s's claim lasts", r.TaskID)
			require.True(t, r.Started.Equal(now), "%s started %s", r.TaskID, r.Started)
			out = append(out, r.Worker.TaskQueueID+" "+r.Worker.WorkerID+" "+r.TaskID+"/"+string(rune('0'+r.RunID)))
		}
		slices.Sort(out)
		return out
	}
	ab := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "a_b"}
	require.Equal(t, []string{testQueue + " a_b heldA/0", testQueue + " a_b heldUnder/0"}, held(store.HeldRunsQuery{Worker: &ab}))
	axb := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "aXb"}
	require.Equal(t, []string{testQueue + " aXb heldX/0", testQueue + " aXb retried/1"}, held(store.HeldRunsQuery{Worker: &axb}))
	otherGroup := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "h", WorkerID: "a_b"}
	require.Empty(t, held(store.HeldRunsQuery{Worker: &otherGroup}), "the same id in another worker group")
	require.Len(t, held(store.HeldRunsQuery{TaskQueueID: testQueue}), 4)
	require.Equal(t, []string{"prov/other a_b otherQueue/0"}, held(store.HeldRunsQuery{TaskQueueID: "prov/other"}))
	require.Len(t, held(store.HeldRunsQuery{}), 5, "every queue")
	runs, err := e.s.ListHeldRuns(e.ctx, store.HeldRunsQuery{}, now.Add(claimTimeout))
	require.NoError(t, err)
	require.Empty(t, runs, "no claim lasts past its takenUntil")
}
