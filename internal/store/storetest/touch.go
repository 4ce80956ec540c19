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
	require.NoError(t, e.s.TouchMany(e.ctx, queues, workers))

	q, err := e.s.GetTaskQueue(e.ctx, testQueue, Epoch)
	require.NoError(t, err)
	require.True(t, q.LastDateActive.Equal(Epoch.Add(time.Minute)), "lastDateActive %s", q.LastDateActive)
	require.True(t, q.Expires.Equal(Epoch.Add(2*time.Hour)), "expires %s", q.Expires)
	require.Equal(t, "experimental", q.Stability)

	ws, _, err := e.s.ListWorkers(e.ctx, testQueue, Epoch, nil, store.Page{Limit: 1000})
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
	require.NoError(t, e.s.TouchMany(e.ctx, nil, []store.TouchWorkerParams{stale, fresh}))
	w, err = e.s.GetWorker(e.ctx, key(7), Epoch)
	require.NoError(t, err)
	require.True(t, w.LastDateActive.Equal(Epoch.Add(time.Minute)), "lastDateActive %s moved back", w.LastDateActive)
	require.True(t, w.Expires.Equal(Epoch.Add(time.Minute+time.Hour)), "expires %s moved back", w.Expires)
	w, err = e.s.GetWorker(e.ctx, key(8), Epoch)
	require.NoError(t, err)
	require.True(t, w.LastDateActive.Equal(Epoch.Add(time.Hour)))
	require.True(t, w.FirstClaim.Equal(Epoch), "firstClaim stays")

	require.NoError(t, e.s.TouchMany(e.ctx, nil, nil), "an empty batch is nothing")
}
