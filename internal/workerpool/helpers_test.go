package workerpool_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/testclock"
)

const testQueue = "prov-maint/wt-maint"

// recorder is a workerpool.Publisher that keeps what it is handed.
type recorder struct {
	mu      sync.Mutex
	changes []store.Change
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) Publish(_ context.Context, changes []store.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, changes...)
	r.mu.Unlock()
}

// events lists "<taskId> <kind>" of every event published, or only of
// the named tasks.
func (r *recorder) events(taskIDs ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.changes {
		if len(taskIDs) > 0 && !slices.Contains(taskIDs, c.Task.TaskID) {
			continue
		}
		for _, e := range c.Events {
			out = append(out, c.Task.TaskID+" "+e.Kind)
		}
	}
	return out
}

type bundle struct {
	store store.Store
	clock *testclock.Clock
	pub   *recorder
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/hopper.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return &bundle{store: db, clock: testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), pub: newRecorder()}
}

// createClaimed creates a task and claims its run 0 until now + claimFor.
func (b *bundle) createClaimed(t testing.TB, taskID string, claimFor time.Duration) {
	t.Helper()
	ctx := context.Background()
	now := b.clock.Now()
	_, err := b.store.CreateTask(ctx, store.CreateTaskParams{TaskID: taskID, Task: storetest.NewTask(testQueue, now), Now: now})
	require.NoError(t, err)
	res, err := b.store.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "w",
		Count: 1, Now: now, TakenUntil: now.Add(claimFor)})
	require.NoError(t, err)
	require.Len(t, res.Claims, 1)
}

// replicas opens n stores on one database of the driver ("sqlite": one
// handle; "postgres": a handle each on one schema, as replicas have).
func replicas(t testing.TB, driver string, n int) []store.Store {
	t.Helper()
	if driver == "postgres" && os.Getenv("HOPPER_TEST_POSTGRES") == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to test against")
	}
	db, open := apitest.OpenStore(t, driver)
	out := []store.Store{db}
	for len(out) < n {
		out = append(out, open())
	}
	return out
}
