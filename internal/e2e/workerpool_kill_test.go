package e2e_test

import (
	"context"
	"encoding/json"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestRemoveWorkerCutShortResolvesItsRuns runs two `hopper serve` replicas
// on one PostgreSQL database and kills (SIGKILL) the one serving
// removeWorker between its two steps: the test holds the rows of the
// worker's claimed tasks, so the replica records the worker stopped and
// then waits to resolve its first run; it is killed there, and the client
// retries on the other replica. The retry answered 200, found the worker
// already stopped and resolved nothing, and the runs stayed running until
// their claims expired (47 runs, takenUntil 20 minutes away, in the
// campaign); the worker scanner skipped stopped workers. Now every run is
// resolved exception/worker-shutdown, once, and retried.
func TestRemoveWorkerCutShortResolvesItsRuns(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	start := func(name string) *e2e.Server {
		u, err := url.Parse(db)
		require.NoError(t, err)
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--db", u.String()}, Env: env})
	}
	a, b := start("hopper-a"), start("hopper-b")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := rootClient(b)
	const pool = "e2e-kill/remove-worker"
	_, err := root.CreateWorkerPool(ctx, pool, &tcclient.WorkerPoolDefinition{ProviderID: "static", Description: "kill inside removeWorker",
		Config: json.RawMessage(`{}`), Owner: "ops@example.com"})
	require.NoError(t, err)
	secret := tcclient.NewTaskID() + tcclient.NewTaskID()
	_, err = root.CreateStaticWorker(ctx, pool, "rack", "m1", tcclient.NewTime(time.Now().Add(time.Hour)), 8, secret)
	require.NoError(t, err)
	reg, err := (&tcclient.Client{RootURL: b.RootURL}).RegisterStaticWorker(ctx, pool, "static", "rack", "m1", secret)
	require.NoError(t, err)
	worker := &tcclient.Client{RootURL: b.RootURL, Credentials: &reg.Credentials}
	const runs = 8
	var taskIDs []string
	for range runs {
		id := tcclient.NewTaskID()
		_, err := root.CreateTask(ctx, id, newTask(pool))
		require.NoError(t, err)
		taskIDs = append(taskIDs, id)
	}
	claimed := 0
	for claimed < runs {
		resp, err := worker.ClaimWork(ctx, pool, &tcclient.ClaimWorkRequest{WorkerGroup: "rack", WorkerID: "m1", Tasks: runs - claimed})
		require.NoError(t, err)
		claimed += len(resp.Tasks)
	}

	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	lock, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, "SELECT 1 FROM tasks WHERE task_id = ANY($1) FOR UPDATE", taskIDs)
	require.NoError(t, err)
	removed := make(chan error, 1)
	go func() { removed <- rootClient(a).RemoveWorker(ctx, pool, "rack", "m1") }()
	watch, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer watch.Close(context.Background())
	testclock.WaitFor(t, time.Minute, "replica a to wait to resolve the removed worker's first run", func() bool {
		var n int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
			WHERE NOT l.granted AND s.application_name = 'hopper-a'`).Scan(&n)
		require.NoError(t, err)
		return n > 0
	})
	require.NoError(t, a.Signal(syscall.SIGKILL))
	<-a.Done()
	require.Error(t, <-removed, "the killed replica's answer")
	require.NoError(t, lock.Rollback(ctx))
	w, err := root.GetPoolWorker(ctx, pool, "rack", "m1")
	require.NoError(t, err)
	require.Equal(t, "stopped", w.State, "the first step was committed")

	// The client's retry, on the other replica.
	require.NoError(t, root.RemoveWorker(ctx, pool, "rack", "m1"))
	retriedAt := time.Now()
	testclock.WaitFor(t, 2*time.Minute, "every run of the removed worker to be resolved", func() bool {
		for _, id := range taskIDs {
			st, err := root.Status(ctx, id)
			require.NoError(t, err)
			if st.Runs[0].State == "running" {
				return false
			}
		}
		return true
	})
	t.Logf("%d runs resolved %s after the retry", runs, time.Since(retriedAt).Round(time.Millisecond))
	for _, id := range taskIDs {
		st, err := root.Status(ctx, id)
		require.NoError(t, err)
		require.Len(t, st.Runs, 2, "task %s: resolved once, retried once", id)
		require.Equal(t, "exception", st.Runs[0].State)
		require.Equal(t, "worker-shutdown", st.Runs[0].ReasonResolved)
		require.Equal(t, "pending", st.Runs[1].State)
	}
}
