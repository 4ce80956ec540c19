package workerpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerpool"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// idleEngine is an engine whose every worker runs: the passes' own cost,
// without a daemon's.
type idleEngine struct{}

func (idleEngine) Start(context.Context, *workermanager.Pool, *workermanager.Worker, workerprovider.Registration) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

func (idleEngine) Check(context.Context, *workermanager.Pool, *workermanager.Worker) (workerprovider.Status, error) {
	return workerprovider.Status{Running: true}, nil
}

func (idleEngine) Stop(context.Context, *workermanager.Pool, *workermanager.Worker) error { return nil }

// fleet fills a store with pools docker pools of perPool running workers
// each, at their maximum, with nothing pending.
func fleet(b *testing.B, pools, perPool int) (store.Store, *testclock.Clock, map[string]workerpool.PoolProvider) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir()+"/hopper.db")
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	clock := testclock.New(now)
	for i := range pools {
		p := &workermanager.Pool{WorkerPoolID: fmt.Sprintf("bench/pool-%03d", i), ProviderID: "docker", PreviousProviderIDs: []string{},
			Config: json.RawMessage(fmt.Sprintf(`{"minCapacity":%d,"maxCapacity":%d}`, perPool, perPool)), Owner: "o@example.com", Created: now, LastModified: now}
		require.NoError(b, st.CreateWorkerPool(ctx, p))
		for j := range perPool {
			w := workermanager.NewRequestedWorker(p, "docker", fmt.Sprintf("w%05d", j), 1, now)
			w.State, w.RegisteredAt = workermanager.StateRunning, now
			_, err := st.CreatePoolWorker(ctx, w)
			require.NoError(b, err)
		}
	}
	return st, clock, map[string]workerpool.PoolProvider{"docker": {Type: workermanager.ProviderTypeDocker, Provider: idleEngine{}}}
}

// BenchmarkProvisionerPass measures, on SQLite, one provisioner pass over
// 100 pools and 10,000 running workers with nothing to start: the lease,
// the pools, their counts by state (one query) and each pool's queue
// counts.
func BenchmarkProvisionerPass(b *testing.B) {
	st, clock, providers := fleet(b, 100, 100)
	p := &workerpool.Provisioner{Store: st, Providers: providers, Holder: "bench", Clock: clock}
	ctx := context.Background()
	for b.Loop() {
		n, err := p.RunOnce(ctx)
		if err != nil || n != 0 {
			b.Fatalf("started %d: %v", n, err)
		}
	}
}

// BenchmarkScannerPass measures, on SQLite, one worker-scanner pass over
// the same fleet: every worker checked (by an engine that answers at
// once) and its last work looked up.
func BenchmarkScannerPass(b *testing.B) {
	st, clock, providers := fleet(b, 100, 100)
	s := &workerpool.WorkerScanner{Store: st, Providers: providers, Holder: "bench", Clock: clock}
	ctx := context.Background()
	for b.Loop() {
		n, err := s.RunOnce(ctx)
		if err != nil || n != 0 {
			b.Fatalf("stopped %d: %v", n, err)
		}
	}
}

// BenchmarkRemovedWorkerBackToPending measures, on SQLite, how long a
// removed worker's claimed task takes to be pending again once the
// Worker Manager removes it (before: up to the claim timeout, 20 min).
func BenchmarkRemovedWorkerBackToPending(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir()+"/hopper.db")
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	clock := testclock.New(time.Now())
	bb := &bundle{store: st, clock: clock, pub: &storetest.ChangeRecorder{}}
	r := &workerpool.WorkerRunResolver{Store: st}
	key := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "w"}
	for b.Loop() {
		b.StopTimer()
		bb.createClaimed(b, tcclient.NewTaskID(), time.Hour)
		b.StartTimer()
		n, err := r.ResolveWorkerRuns(ctx, key, clock.Now())
		if err != nil || n != 1 {
			b.Fatalf("resolved %d: %v", n, err)
		}
	}
}
