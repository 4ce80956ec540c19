package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestWorkerHonoursPurgeCache: `hopper worker` keeps a writable cache
// across tasks until `hopper cache purge` asks the pool to empty it; the
// next task then gets an empty cache, and the tasks after it share the new
// one again.
func TestWorkerHonoursPurgeCache(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	const tq = "e2e-purge/cache"
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: tq})
	root := rootClient(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Each task counts its runs in the cache and fails if the count is
	// not the expected one.
	run := func(want int) {
		t.Helper()
		task := newTask(tq)
		task.Scopes = []string{"generic-worker:cache:counter"}
		script := fmt.Sprintf(`n=$(( $(cat cache/n 2>/dev/null || echo 0) + 1 )); echo $n > cache/n; echo "run $n"; test $n -eq %d`, want)
		task.Payload = json.RawMessage(fmt.Sprintf(`{"command":[["sh","-c",%q]],"maxRunTime":60,"mounts":[{"cacheName":"counter","directory":"cache"}]}`, script))
		taskID := tcclient.NewTaskID()
		_, err := root.CreateTask(ctx, taskID, task)
		require.NoError(t, err)
		for {
			st, err := root.Status(ctx, taskID)
			require.NoError(t, err)
			if st.State == tcclient.StateCompleted {
				return
			}
			require.NotEqual(t, tcclient.StateFailed, st.State, "the cache did not hold %d runs", want-1)
			require.NotEqual(t, tcclient.StateException, st.State)
			select {
			case <-ctx.Done():
				t.Fatalf("task %s not resolved in time", taskID)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	run(1)
	run(2)

	cmd := exec.CommandContext(ctx, e2e.Binary(t), "cache", "purge", tq, "counter")
	cmd.Env = srv.Env()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "purge requested")

	reqs, err := root.PurgeRequests(ctx, tq, time.Time{})
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, "counter", reqs[0].CacheName)
	require.Equal(t, "e2e-purge", reqs[0].ProvisionerID)

	cmd = exec.CommandContext(ctx, e2e.Binary(t), "cache", "requests", tq)
	cmd.Env = srv.Env()
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.Contains(string(out), "counter"), "%s", out)

	run(1)
	run(2)
}

// TestOfficialClientPurgeCache runs e2e/node/purgecache.mjs: the
// Purge-Cache API through the npm client, scopes and paging included.
func TestOfficialClientPurgeCache(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "purgecache.mjs", srv.Env()...)
	require.Contains(t, out, "purge-cache: all passed")
	t.Log(out)
}
