package workerpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerpool"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// TestProvisionerUnreachableDaemon: a pool whose daemon cannot be reached
// gets a pool error for the worker it could not start, and that worker
// leaves the pool's accounting at once (stopped), so the next pass tries
// again instead of counting a container that never ran.
func TestProvisionerUnreachableDaemon(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	cfg := fmt.Sprintf(`{"minCapacity":0,"maxCapacity":3,"image":"hopper-worker:1","hosts":[{"endpoint":"unix://%s/gone.sock"}]}`, t.TempDir())
	pool := &workermanager.Pool{WorkerPoolID: testQueue, ProviderID: "docker", PreviousProviderIDs: []string{}, Config: json.RawMessage(cfg),
		Owner: "o@example.com", Created: now, LastModified: now}
	require.NoError(t, b.store.CreateWorkerPool(ctx, pool))
	_, err := b.store.CreateTask(ctx, store.CreateTaskParams{TaskID: "aaaaaaaaQaaaaaaaaaaaaA", Task: storetest.NewTask(testQueue, now), Now: now})
	require.NoError(t, err)
	p := &workerpool.Provisioner{Store: b.store, Holder: "h", Clock: b.clock,
		Providers: map[string]workerpool.PoolProvider{"docker": {Type: workermanager.ProviderTypeDocker, Provider: &workerprovider.Docker{}}}}
	for range 2 {
		n, err := p.RunOnce(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		b.clock.Advance(5 * time.Second)
	}
	counts, err := b.store.WorkerPoolCounts(ctx, []string{testQueue})
	require.NoError(t, err)
	c := counts[testQueue]
	require.Zero(t, c.Current(), "nothing that did not start is counted")
	require.Equal(t, 2, c.StoppedCount, "one attempt a pass")
	errs, _, err := b.store.ListWorkerPoolErrors(ctx, store.PoolErrorFilter{WorkerPoolID: testQueue}, store.Page{})
	require.NoError(t, err)
	require.Len(t, errs, 2)
	require.Equal(t, "provisioning-error", errs[0].Kind)
	require.Contains(t, errs[0].Description, "gone.sock")
}
