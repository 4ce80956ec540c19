package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestPoolWorkerJoinsAndLeaves is the worked example of
// docs/worker-pools.md with real processes: `hopper pool create` and
// `hopper pool add-worker` declare a static pool and a machine; `hopper
// worker --worker-pool` registers with the secret alone, takes its config
// from the pool and the pool's secret, runs a task, reregisters as its
// short-lived credentials run out and still runs tasks; `hopper pool
// remove-worker` puts its running task back to pending at once and the
// worker stops.
func TestPoolWorkerJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "TASKCLUSTER_CLIENT_ID=" + srv.ClientID, "TASKCLUSTER_ACCESS_TOKEN=" + srv.Token}
	dir := t.TempDir()
	const pool = "proj/linux"

	// The guide's pool, its secret and role, and the second machine, as
	// written; only the credentials' lifetime is cut to 6 s, to see them
	// renewed.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pool.yml"), []byte(e2e.DocExample(t, "worker-pools-pool").Replace(t,
		"reregistrationTimeout: 86400", "reregistrationTimeout: 6",
		// One task at a time: with a free slot, a claimWork long-poll
		// the worker opened before its removal may still be handed the
		// removed task's retry, a race the queue does not close yet.
		"capacity: 2", "capacity: 1")), 0o600))
	sh := e2e.DocShell{Dir: dir, Env: env}
	out, err := sh.Run(t, e2e.DocExample(t, "worker-pools-setup"))
	require.NoError(t, err, out)
	require.Contains(t, out, "provider:  static")
	out, err = sh.Run(t, e2e.DocExample(t, "worker-pools-add-worker"))
	require.NoError(t, err, out)
	require.Contains(t, out, "--worker-pool "+pool)
	secretFile := filepath.Join(dir, "build-2.secret")
	info, err := os.Stat(secretFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}

	// The machine's command, as written, from its own directory.
	machine := t.TempDir()
	w := e2e.DocShell{Dir: machine, Replace: []string{"https://hopper.example.com", srv.RootURL,
		"/etc/hopper/build-2.secret", secretFile, "--worker-id build-2", "--worker-id build-2 --pool-check-interval 500ms --log-level debug"}}.
		Start(t, e2e.DocExample(t, "worker-pools-worker"))

	run := func(command string) string {
		id := tcclient.NewTaskID()
		payload, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", command}}, "maxRunTime": 120})
		require.NoError(t, err)
		now := time.Now()
		_, err = root.CreateTask(ctx, id, &tcclient.TaskDefinition{TaskQueueID: pool, Created: tcclient.NewTime(now),
			Deadline: tcclient.NewTime(now.Add(time.Hour)), Payload: payload,
			Metadata: tcclient.TaskMetadata{Name: "pool", Description: "pool e2e", Owner: "e2e@example.com", Source: "https://example.com/e2e"}})
		require.NoError(t, err)
		return id
	}
	waitRun := func(id string, runID int, state string) *tcclient.TaskStatus {
		t.Helper()
		var st *tcclient.TaskStatus
		require.Eventually(t, func() bool {
			st, err = root.Status(ctx, id)
			require.NoError(t, err)
			return len(st.Runs) > runID && st.Runs[runID].State == state
		}, time.Minute, 100*time.Millisecond, "task %s run %d never %s: %+v", id, runID, state, st)
		return st
	}
	first := run("echo hello from the pool")
	st := waitRun(first, 0, "completed")
	require.Equal(t, "build-2", st.Runs[0].WorkerID)

	// The credentials last 6 s: once the first ones have expired the
	// worker, reregistered, still works.
	m := regexp.MustCompile(`msg="registered with the worker manager".* credentialsExpire=(\S+)`).FindStringSubmatch(w.Logs())
	require.NotNil(t, m, "no registration in the worker's log:\n%s", w.Logs())
	firstExpire, err := time.Parse(time.RFC3339, m[1])
	require.NoError(t, err)
	testclock.WaitFor(t, time.Minute, "the first credentials to expire and the worker to reregister", func() bool {
		return time.Now().After(firstExpire) && strings.Contains(w.Logs(), "reregistered with the worker manager")
	})
	second := run("true")
	waitRun(second, 0, "completed")

	out, errOut, code := hopperCLI(t, env, "pool", "show", pool)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "rack-1/build-2")
	require.Contains(t, out, "running")
	// The guide's listing has the lines and columns hopper prints.
	for _, line := range strings.Split(e2e.DocExample(t, "worker-pools-show").Text, "\n") {
		if key, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(key, " ") {
			require.Regexp(t, "(?m)^"+regexp.QuoteMeta(key)+":", out)
		}
		if strings.HasPrefix(line, "WORKER") {
			require.Contains(t, out, line)
		}
	}
	// The queue's listWorkers says the worker's pool state.
	queueState := func() tcclient.QueueWorker {
		t.Helper()
		ws, err := root.ListWorkers(ctx, pool, tcclient.ListOptions{})
		require.NoError(t, err)
		require.Len(t, ws.Workers, 1)
		return ws.Workers[0]
	}
	qw := queueState()
	require.Equal(t, "running", qw.State)
	require.Equal(t, "static", qw.ProviderID)
	require.Equal(t, 1, qw.Capacity)

	long := run("sleep 120")
	waitRun(long, 0, "running")
	removedAt := time.Now()
	_, errOut, code = hopperCLI(t, env, "pool", "remove-worker", pool, "rack-1", "build-2")
	require.Equal(t, 0, code, errOut)
	st, err = root.Status(ctx, long)
	require.NoError(t, err)
	require.Equal(t, "exception", st.Runs[0].State, "the removed worker's run is resolved at once")
	require.Equal(t, "worker-shutdown", st.Runs[0].ReasonResolved)
	require.Equal(t, "pending", st.Runs[1].State)
	t.Logf("removed worker's task back to pending %s after removeWorker was called", time.Since(removedAt))
	select {
	case <-w.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the removed worker did not stop")
	}
	require.True(t, strings.Contains(w.Logs(), "removed from the worker pool"), "the worker says why it stopped")
	require.Equal(t, "stopped", queueState().State)

	// A machine added to a pool whose workers run two tasks at once is
	// counted at two (add-worker said 1 while the worker ran 2).
	_, err = root.UpdateWorkerPool(ctx, pool, &tcclient.WorkerPoolDefinition{ProviderID: "static", Description: "the build machines",
		Owner: "ops@example.com", Config: json.RawMessage(`{"workerConfig": {"hopperWorker": {"capacity": 2}}}`)})
	require.NoError(t, err)
	_, errOut, code = hopperCLI(t, env, "pool", "add-worker", pool, "rack-1", "build-3", "--secret-file", filepath.Join(dir, "build-3.secret"))
	require.Equal(t, 0, code, errOut)
	pw, err := root.GetPoolWorker(ctx, pool, "rack-1", "build-3")
	require.NoError(t, err)
	require.Equal(t, 2, pw.Capacity)

	// Its secret no longer registers anything.
	_, err = (&tcclient.Client{RootURL: srv.RootURL}).RegisterStaticWorker(ctx, pool, "static", "rack-1", "build-2", readSecret(t, secretFile))
	var apiErr *tcclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
}

func readSecret(t *testing.T, path string) string {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(raw))
}
