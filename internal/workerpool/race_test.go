package workerpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerpool"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// countingEngine is the engine of the provisioner race: it records every
// worker started, and can run a hook inside a start (another replica
// acting while this one is stalled).
type countingEngine struct {
	started atomic.Int32
	onStart func()
}

func (e *countingEngine) Start(_ context.Context, _ *workermanager.Pool, w *workermanager.Worker, _ workerprovider.Registration) (json.RawMessage, error) {
	e.started.Add(1)
	if e.onStart != nil {
		f := e.onStart
		e.onStart = nil
		f()
	}
	return json.RawMessage(fmt.Sprintf(`{"id":%q}`, w.WorkerID)), nil
}

func (e *countingEngine) Check(context.Context, *workermanager.Pool, *workermanager.Worker) (workerprovider.Status, error) {
	return workerprovider.Status{Running: true}, nil
}

func (e *countingEngine) Stop(context.Context, *workermanager.Pool, *workermanager.Worker) error {
	return nil
}

// TestProvisionerRace proves a pool never exceeds its maxCapacity with two
// provisioners on two replicas of one database: both race every pass for
// the lease; one is killed (its lease runs out) and one stalls inside a
// start while the other takes over, and every worker the stalled one
// still tries to add is refused. On PostgreSQL the replicas are two
// handles on one database.
func TestProvisionerRace(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			st := replicas(t, driver, 2)
			provisionerRace(t, st[0], st[len(st)-1])
		})
	}
}

func provisionerRace(t *testing.T, a, b store.Store) {
	ctx := context.Background()
	clock := testclock.New(storetest.Epoch)
	const poolID, max = "race/pool", 5
	pool := &workermanager.Pool{WorkerPoolID: poolID, ProviderID: "docker", PreviousProviderIDs: []string{}, Description: "d",
		Config: json.RawMessage(fmt.Sprintf(`{"minCapacity":1,"maxCapacity":%d}`, max)), Owner: "o@example.com", Created: storetest.Epoch, LastModified: storetest.Epoch}
	require.NoError(t, a.CreateWorkerPool(ctx, pool))
	for range 40 {
		_, err := a.CreateTask(ctx, store.CreateTaskParams{TaskID: ident.NewSlugID(), Task: storetest.NewTask(poolID, storetest.Epoch), Now: storetest.Epoch})
		require.NoError(t, err)
	}
	engine := &countingEngine{}
	providers := map[string]workerpool.PoolProvider{"docker": {Type: workermanager.ProviderTypeDocker, Provider: engine}}
	pa := &workerpool.Provisioner{Store: a, Providers: providers, Holder: "replica-a", Clock: clock, LeaseFor: 30 * time.Second}
	pb := &workerpool.Provisioner{Store: b, Providers: providers, Holder: "replica-b", Clock: clock, LeaseFor: 30 * time.Second}

	live := func() int {
		c, err := a.WorkerPoolCounts(ctx, []string{poolID})
		require.NoError(t, err)
		return c[poolID].RequestedCapacity + c[poolID].RunningCapacity + c[poolID].StoppingCapacity
	}
	// Replica a stalls inside its first start: meanwhile its lease runs
	// out and replica b provisions the pool to its maximum.
	var bStarted int
	engine.onStart = func() {
		clock.Advance(31 * time.Second)
		n, err := pb.RunOnce(ctx)
		require.NoError(t, err)
		bStarted = n
	}
	n, err := pa.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the stalled replica started one worker, then lost the lease")
	require.Equal(t, max-1, bStarted, "the other replica counted it and filled the rest")
	require.Equal(t, max, live())

	// Both race, pass after pass; now and then the holder dies (its lease
	// runs out) and the other takes over.
	for round := range 20 {
		if round%4 == 3 {
			clock.Advance(31 * time.Second)
		}
		var wg sync.WaitGroup
		for _, p := range []*workerpool.Provisioner{pa, pb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := p.RunOnce(ctx)
				require.NoError(t, err)
			}()
		}
		wg.Wait()
		require.LessOrEqual(t, live(), max, "round %d", round)
	}
	require.Equal(t, int32(max), engine.started.Load(), "nothing was started past the maximum")
}
