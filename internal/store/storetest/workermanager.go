package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

func newPool(id string) *workermanager.Pool {
	return &workermanager.Pool{
		WorkerPoolID: id, ProviderID: "static", PreviousProviderIDs: []string{}, Description: "d",
		Config: json.RawMessage(`{"workerConfig":{"a":1}}`), Owner: "o@example.com", EmailOnError: true,
		Created: Epoch, LastModified: Epoch,
	}
}

func newPoolWorker(pool, group, id string, state workermanager.State) *workermanager.Worker {
	return &workermanager.Worker{
		WorkerPoolID: pool, WorkerGroup: group, WorkerID: id, ProviderID: "static", State: state, Capacity: 2,
		Created: Epoch, Expires: Epoch.Add(time.Hour), LastModified: Epoch, LastChecked: Epoch,
		StaticSecretHash: workermanager.HashSecret("s"), ProviderData: json.RawMessage(`{}`),
	}
}

// testWorkerPools covers pools: create once, read, update under lock,
// list in pages, and deletion only of a pool marked deleted with no
// worker left.
func testWorkerPools(t *testing.T, open Opener) {
	e := setup(t, open)
	p := newPool("prov/a")
	require.NoError(t, e.s.CreateWorkerPool(e.ctx, p))
	require.ErrorIs(t, e.s.CreateWorkerPool(e.ctx, newPool("prov/a")), store.ErrExists)
	got, err := e.s.GetWorkerPool(e.ctx, "prov/a")
	require.NoError(t, err)
	require.Equal(t, p, got)
	_, err = e.s.GetWorkerPool(e.ctx, "prov/missing")
	require.ErrorIs(t, err, store.ErrNotFound)

	later := Epoch.Add(time.Minute)
	up, err := e.s.UpdateWorkerPool(e.ctx, "prov/a", func(p *workermanager.Pool) error {
		p.ChangeProvider("docker")
		p.LastModified = later
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "docker", up.ProviderID)
	require.Equal(t, []string{"static"}, up.PreviousProviderIDs)
	got, err = e.s.GetWorkerPool(e.ctx, "prov/a")
	require.NoError(t, err)
	require.Equal(t, up, got)
	_, err = e.s.UpdateWorkerPool(e.ctx, "prov/missing", func(*workermanager.Pool) error { return nil })
	require.ErrorIs(t, err, store.ErrNotFound)

	for _, id := range []string{"prov/b", "prov/c", "prov/d"} {
		require.NoError(t, e.s.CreateWorkerPool(e.ctx, newPool(id)))
	}
	var ids []string
	page := store.Page{Limit: 3}
	for {
		pools, next, err := e.s.ListWorkerPools(e.ctx, page)
		require.NoError(t, err)
		for _, p := range pools {
			ids = append(ids, p.WorkerPoolID)
		}
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	require.Equal(t, []string{"prov/a", "prov/b", "prov/c", "prov/d"}, ids)
	_, _, err = e.s.ListWorkerPools(e.ctx, store.Page{ContinuationToken: "!!"})
	require.ErrorIs(t, err, store.ErrBadContinuationToken)

	// Deletion: only a null-provider pool without workers goes.
	deleted, err := e.s.DeleteWorkerPool(e.ctx, "prov/b")
	require.NoError(t, err)
	require.False(t, deleted, "a pool with a provider stays")
	_, err = e.s.UpdateWorkerPool(e.ctx, "prov/b", func(p *workermanager.Pool) error {
		p.ChangeProvider(workermanager.NullProvider)
		return nil
	})
	require.NoError(t, err)
	_, err = e.s.CreatePoolWorker(e.ctx, newPoolWorker("prov/b", "g", "w", workermanager.StateStopped))
	require.NoError(t, err)
	require.NoError(t, e.s.AddWorkerPoolError(e.ctx, &workermanager.PoolError{WorkerPoolID: "prov/b", ErrorID: "e1", Reported: Epoch, Kind: "k", Title: "t", Description: "d"}))
	deleted, err = e.s.DeleteWorkerPool(e.ctx, "prov/b")
	require.NoError(t, err)
	require.False(t, deleted, "a pool with workers stays")
	require.NoError(t, e.s.DeletePoolWorker(e.ctx, workermanager.Key{WorkerPoolID: "prov/b", WorkerGroup: "g", WorkerID: "w"}))
	deleted, err = e.s.DeleteWorkerPool(e.ctx, "prov/b")
	require.NoError(t, err)
	require.True(t, deleted)
	_, err = e.s.GetWorkerPool(e.ctx, "prov/b")
	require.ErrorIs(t, err, store.ErrNotFound)
	errs, _, err := e.s.ListWorkerPoolErrors(e.ctx, store.PoolErrorFilter{WorkerPoolID: "prov/b"}, store.Page{})
	require.NoError(t, err)
	require.Empty(t, errs, "a deleted pool's errors go with it")
}

// testPoolWorkers covers workers: create once (the existing one comes
// back), update under lock, list with filters and pages, counts by state,
// expiry of stopped workers.
func testPoolWorkers(t *testing.T, open Opener) {
	e := setup(t, open)
	w := newPoolWorker("prov/a", "g1", "w1", workermanager.StateRunning)
	w.ProviderData = json.RawMessage(`{"containerId":"c1"}`)
	got, err := e.s.CreatePoolWorker(e.ctx, w)
	require.NoError(t, err)
	require.Equal(t, w, got)
	dup := newPoolWorker("prov/a", "g1", "w1", workermanager.StateRequested)
	existing, err := e.s.CreatePoolWorker(e.ctx, dup)
	require.ErrorIs(t, err, store.ErrExists)
	require.Equal(t, w, existing)
	key := w.Key()
	got, err = e.s.GetPoolWorker(e.ctx, key)
	require.NoError(t, err)
	require.Equal(t, w, got)
	_, err = e.s.GetPoolWorker(e.ctx, workermanager.Key{WorkerPoolID: "prov/a", WorkerGroup: "g1", WorkerID: "nope"})
	require.ErrorIs(t, err, store.ErrNotFound)

	reg := Epoch.Add(time.Minute)
	up, err := e.s.UpdatePoolWorker(e.ctx, key, func(w *workermanager.Worker) error {
		w.SecretHash, w.PreviousSecretHash = "h", "p"
		w.RegisteredAt = reg
		w.TerminateAfter = reg.Add(time.Hour)
		w.LastModified = reg
		return nil
	})
	require.NoError(t, err)
	got, err = e.s.GetPoolWorker(e.ctx, key)
	require.NoError(t, err)
	require.Equal(t, up, got)
	require.Equal(t, reg, got.RegisteredAt)
	require.Equal(t, "p", got.PreviousSecretHash)
	_, err = e.s.UpdatePoolWorker(e.ctx, workermanager.Key{WorkerPoolID: "x/y", WorkerGroup: "g", WorkerID: "w"}, func(*workermanager.Worker) error { return nil })
	require.ErrorIs(t, err, store.ErrNotFound)

	states := []workermanager.State{workermanager.StateRequested, workermanager.StateRunning, workermanager.StateStopping, workermanager.StateStopped}
	for i := range 8 {
		_, err := e.s.CreatePoolWorker(e.ctx, newPoolWorker("prov/a", fmt.Sprintf("g%d", i%2+1), fmt.Sprintf("x%d", i), states[i%4]))
		require.NoError(t, err)
	}
	_, err = e.s.CreatePoolWorker(e.ctx, newPoolWorker("prov/b", "g1", "w1", workermanager.StateRunning))
	require.NoError(t, err)

	list := func(f store.PoolWorkerFilter, limit int) []string {
		var out []string
		page := store.Page{Limit: limit}
		for {
			ws, next, err := e.s.ListPoolWorkers(e.ctx, f, page)
			require.NoError(t, err)
			for _, w := range ws {
				out = append(out, w.WorkerPoolID+"/"+w.WorkerGroup+"/"+w.WorkerID)
			}
			if next == "" {
				return out
			}
			page.ContinuationToken = next
		}
	}
	require.Equal(t, []string{"prov/a/g1/w1", "prov/a/g1/x0", "prov/a/g1/x2", "prov/a/g1/x4", "prov/a/g1/x6",
		"prov/a/g2/x1", "prov/a/g2/x3", "prov/a/g2/x5", "prov/a/g2/x7"}, list(store.PoolWorkerFilter{WorkerPoolID: "prov/a"}, 2))
	require.Equal(t, []string{"prov/a/g2/x1", "prov/a/g2/x3", "prov/a/g2/x5", "prov/a/g2/x7"}, list(store.PoolWorkerFilter{WorkerPoolID: "prov/a", WorkerGroup: "g2"}, 3))
	require.Equal(t, []string{"prov/a/g1/w1", "prov/a/g2/x1", "prov/a/g2/x5"}, list(store.PoolWorkerFilter{WorkerPoolID: "prov/a", State: workermanager.StateRunning}, 1))
	require.Len(t, list(store.PoolWorkerFilter{}, 4), 10)

	counts, err := e.s.WorkerPoolCounts(e.ctx, []string{"prov/a", "prov/none"})
	require.NoError(t, err)
	require.Equal(t, map[string]workermanager.Counts{"prov/a": {
		RequestedCount: 2, RunningCount: 3, StoppingCount: 2, StoppedCount: 2,
		RequestedCapacity: 4, RunningCapacity: 6, StoppingCapacity: 4, StoppedCapacity: 4,
	}}, counts)
	all, err := e.s.WorkerPoolCounts(e.ctx, nil)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, 1, all["prov/b"].RunningCount)

	// Stopped workers past their expiry go; the others stay.
	nWorkers, _, err := e.s.ExpireWorkerManager(e.ctx, Epoch.Add(2*time.Hour), Epoch)
	require.NoError(t, err)
	require.Equal(t, 2, nWorkers)
	require.Len(t, list(store.PoolWorkerFilter{WorkerPoolID: "prov/a"}, 100), 7)
}

// testPoolErrors covers errors: newest first, filtered, paged, read
// since a time, expired.
func testPoolErrors(t *testing.T, open Opener) {
	e := setup(t, open)
	for i := range 5 {
		pool := "prov/a"
		if i == 4 {
			pool = "prov/b"
		}
		require.NoError(t, e.s.AddWorkerPoolError(e.ctx, &workermanager.PoolError{
			WorkerPoolID: pool, ErrorID: fmt.Sprintf("e%d", i), Reported: Epoch.Add(time.Duration(i/2) * time.Hour),
			Kind: "kind", Title: "title", Description: "desc", Extra: map[string]any{"workerId": "w"}, LaunchConfigID: map[bool]string{true: "lc"}[i == 1],
		}))
	}
	var ids []string
	page := store.Page{Limit: 2}
	for {
		errs, next, err := e.s.ListWorkerPoolErrors(e.ctx, store.PoolErrorFilter{WorkerPoolID: "prov/a"}, page)
		require.NoError(t, err)
		for _, x := range errs {
			ids = append(ids, x.ErrorID)
		}
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	require.Equal(t, []string{"e2", "e3", "e0", "e1"}, ids)
	one, _, err := e.s.ListWorkerPoolErrors(e.ctx, store.PoolErrorFilter{WorkerPoolID: "prov/a", LaunchConfigID: "lc"}, store.Page{})
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, "e1", one[0].ErrorID)
	require.Equal(t, map[string]any{"workerId": "w"}, one[0].Extra)
	byID, _, err := e.s.ListWorkerPoolErrors(e.ctx, store.PoolErrorFilter{ErrorID: "e4"}, store.Page{})
	require.NoError(t, err)
	require.Len(t, byID, 1)
	require.Equal(t, "prov/b", byID[0].WorkerPoolID)

	since, err := e.s.WorkerPoolErrorsSince(e.ctx, "", Epoch.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, since, 3)
	since, err = e.s.WorkerPoolErrorsSince(e.ctx, "prov/a", Epoch.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, since, 2)

	_, nErrs, err := e.s.ExpireWorkerManager(e.ctx, Epoch, Epoch.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, nErrs)
}

// testLeaseRace proves the provisioner's lease goes to one holder at a
// time: many holders race for it on every store of the fixture; the one
// that has it keeps it by renewing; once it runs out another may take it.
func testLeaseRace(t *testing.T, open Opener) {
	e := setup(t, open)
	const holders = 16
	var won atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := fmt.Sprintf("replica-%d", i)
			ok, err := e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: h, Now: Epoch, Until: Epoch.Add(time.Minute)})
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				won.Add(1)
				winner.Store(h)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), won.Load(), "exactly one holder takes a free lease")
	h := winner.Load().(string)
	ok, err := e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: h, Now: Epoch.Add(30 * time.Second), Until: Epoch.Add(90 * time.Second)})
	require.NoError(t, err)
	require.True(t, ok, "the holder renews")
	ok, err = e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: "other", Now: Epoch.Add(80 * time.Second), Until: Epoch.Add(2 * time.Minute)})
	require.NoError(t, err)
	require.False(t, ok, "nobody else takes a live lease")
	ok, err = e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: "other", Now: Epoch.Add(90 * time.Second), Until: Epoch.Add(3 * time.Minute)})
	require.NoError(t, err)
	require.True(t, ok, "a lease that ran out is free (its holder died)")
	require.NoError(t, e.s.ReleaseLease(e.ctx, "provisioner", h), "releasing a lost lease changes nothing")
	ok, err = e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: h, Now: Epoch.Add(100 * time.Second), Until: Epoch.Add(3 * time.Minute)})
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, e.s.ReleaseLease(e.ctx, "provisioner", "other"))
	ok, err = e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: h, Now: Epoch.Add(100 * time.Second), Until: Epoch.Add(3 * time.Minute)})
	require.NoError(t, err)
	require.True(t, ok, "a released lease is free")
}

// testRequestUnderLease proves a worker is requested only under a live
// lease: once the lease ran out and another holder took it, the old
// holder adds nothing.
func testRequestUnderLease(t *testing.T, open Opener) {
	e := setup(t, open)
	w := newPoolWorker("prov/a", "g", "w1", workermanager.StateRequested)
	require.ErrorIs(t, e.s.RequestPoolWorker(e.ctx, store.RequestPoolWorkerParams{Worker: w, Lease: "provisioner", Holder: "a", Now: Epoch}), store.ErrLeaseLost, "no lease yet")
	ok, err := e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: "a", Now: Epoch, Until: Epoch.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, e.s.RequestPoolWorker(e.ctx, store.RequestPoolWorkerParams{Worker: w, Lease: "provisioner", Holder: "a", Now: Epoch.Add(time.Second)}))
	require.ErrorIs(t, e.s.RequestPoolWorker(e.ctx, store.RequestPoolWorkerParams{Worker: w, Lease: "provisioner", Holder: "a", Now: Epoch.Add(time.Second)}), store.ErrExists)
	require.ErrorIs(t, e.s.RequestPoolWorker(e.ctx, store.RequestPoolWorkerParams{Worker: newPoolWorker("prov/a", "g", "w2", workermanager.StateRequested), Lease: "provisioner", Holder: "b", Now: Epoch.Add(time.Second)}), store.ErrLeaseLost, "not the holder")
	require.ErrorIs(t, e.s.RequestPoolWorker(e.ctx, store.RequestPoolWorkerParams{Worker: newPoolWorker("prov/a", "g", "w2", workermanager.StateRequested), Lease: "provisioner", Holder: "a", Now: Epoch.Add(time.Minute)}), store.ErrLeaseLost, "the lease ran out")
	ok, err = e.s.TakeLease(e.ctx, store.TakeLeaseParams{Name: "provisioner", Holder: "b", Now: Epoch.Add(time.Minute), Until: Epoch.Add(2 * time.Minute)})
	require.NoError(t, err)
	require.True(t, ok)
	require.ErrorIs(t, e.s.RequestPoolWorker(e.ctx, store.RequestPoolWorkerParams{Worker: newPoolWorker("prov/a", "g", "w2", workermanager.StateRequested), Lease: "provisioner", Holder: "a", Now: Epoch.Add(61 * time.Second)}), store.ErrLeaseLost)
	got, err := e.s.GetPoolWorker(e.ctx, w.Key())
	require.NoError(t, err)
	require.Equal(t, w, got)
}
