package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testTouchMany: a batch of touches creates and refreshes task queues and
// workers as TouchTaskQueue and TouchWorker do, keeps the latest of a key
// given twice, never moves lastDateActive or expires back, and takes more
// rows than one statement holds.
func testTouchMany(t *testing.T, open Opener) {
	e := setup(t, open)
	key := func(i int) store.WorkerKey {
		return store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: fmt.Sprintf("w%04d", i)}
	}
	const n = 1203 // more than two statements' worth
	at := func(d time.Duration) store.TouchWorkerParams {
		return store.TouchWorkerParams{Now: Epoch.Add(d), Expires: Epoch.Add(d + time.Hour)}
	}
	var workers []store.TouchWorkerParams
	for i := range n {
		w := at(0)
		w.Key = key(i)
		workers = append(workers, w)
	}
	later := at(time.Minute)
	later.Key = key(7)
	workers = append(workers, later)
	queues := []store.TouchTaskQueueParams{
		{TaskQueueID: testQueue, Now: Epoch, Expires: Epoch.Add(time.Hour)},
		{TaskQueueID: testQueue, Now: Epoch.Add(time.Minute), Expires: Epoch.Add(2 * time.Hour)},
	}
	require.NoError(t, e.s.TouchMany(e.ctx, queues, workers, nil))

	q, err := e.s.GetTaskQueue(e.ctx, testQueue, Epoch)
	require.NoError(t, err)
	require.True(t, q.LastDateActive.Equal(Epoch.Add(time.Minute)), "lastDateActive %s", q.LastDateActive)
	require.True(t, q.Expires.Equal(Epoch.Add(2*time.Hour)), "expires %s", q.Expires)
	require.Equal(t, "experimental", q.Stability)

	ws, _, err := e.s.ListWorkers(e.ctx, Epoch, store.WorkerFilter{TaskQueueID: testQueue}, store.Page{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, ws, 1000, "one full page of the %d workers", n)
	w, err := e.s.GetWorker(e.ctx, key(7), Epoch)
	require.NoError(t, err)
	require.True(t, w.LastDateActive.Equal(Epoch.Add(time.Minute)), "the later touch of a key given twice wins")
	require.True(t, w.FirstClaim.Equal(Epoch.Add(time.Minute)))

	// An older batch moves nothing back; a newer one refreshes.
	stale := at(-time.Hour)
	stale.Key = key(7)
	fresh := at(time.Hour)
	fresh.Key = key(8)
	require.NoError(t, e.s.TouchMany(e.ctx, nil, []store.TouchWorkerParams{stale, fresh}, nil))
	w, err = e.s.GetWorker(e.ctx, key(7), Epoch)
	require.NoError(t, err)
	require.True(t, w.LastDateActive.Equal(Epoch.Add(time.Minute)), "lastDateActive %s moved back", w.LastDateActive)
	require.True(t, w.Expires.Equal(Epoch.Add(time.Minute+time.Hour)), "expires %s moved back", w.Expires)
	w, err = e.s.GetWorker(e.ctx, key(8), Epoch)
	require.NoError(t, err)
	require.True(t, w.LastDateActive.Equal(Epoch.Add(time.Hour)))
	require.True(t, w.FirstClaim.Equal(Epoch), "firstClaim stays")

	require.NoError(t, e.s.TouchMany(e.ctx, nil, nil, nil), "an empty batch is nothing")
}

// testTouchManyRecentTasks: recent tasks given with a batch land after the
// workers' records, so a worker's first claim, batched with its first
// touch, is kept; runs given twice for a worker are appended in order, the
// last maxRecentTasks kept; a worker with no record keeps none.
func testTouchManyRecentTasks(t *testing.T, open Opener) {
	e := setup(t, open)
	newcomer := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "new"}
	known := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "known"}
	unknown := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "nobody"}
	touch := func(k store.WorkerKey) store.TouchWorkerParams {
		return store.TouchWorkerParams{Key: k, Now: Epoch, Expires: Epoch.Add(time.Hour)}
	}
	require.NoError(t, e.s.TouchMany(e.ctx, nil, []store.TouchWorkerParams{touch(known)}, nil))
	runs := func(from, n int) []store.RecentTask {
		var out []store.RecentTask
		for i := range n {
			out = append(out, store.RecentTask{TaskID: fmt.Sprintf("t%02d", from+i)})
		}
		return out
	}
	require.NoError(t, e.s.TouchMany(e.ctx, nil, []store.TouchWorkerParams{touch(newcomer)}, []store.RecentTasksParams{
		{Key: known, Tasks: runs(0, 15)},
		{Key: newcomer, Tasks: runs(0, 1)},
		{Key: unknown, Tasks: runs(0, 1)},
		{Key: known, Tasks: runs(15, 10)},
	}))
	w, err := e.s.GetWorker(e.ctx, newcomer, Epoch)
	require.NoError(t, err)
	require.Equal(t, runs(0, 1), w.RecentTasks, "the first claim, batched with the first touch")
	w, err = e.s.GetWorker(e.ctx, known, Epoch)
	require.NoError(t, err)
	require.Equal(t, runs(25-len(w.RecentTasks), len(w.RecentTasks)), w.RecentTasks, "appended in order, the newest kept")
	require.Less(t, len(w.RecentTasks), 25)
	_, err = e.s.GetWorker(e.ctx, unknown, Epoch)
	require.Error(t, err, "no record is made for recent tasks alone")
}
