package workerpool_test

import (
	"context"
	"os"
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

type bundle struct {
	store store.Store
	clock *testclock.Clock
	pub   *storetest.ChangeRecorder
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/hopper.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return &bundle{store: db, clock: testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), pub: &storetest.ChangeRecorder{}}
}

// createClaimed creates a task and claims its run 0 until now + claimFor.
func (b *bundle) createClaimed(t testing.TB, taskID string, claimFor time.Duration) {
	t.Helper()
	storetest.CreateClaimed(t, b.store, testQueue, taskID, b.clock.Now(), claimFor)
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
