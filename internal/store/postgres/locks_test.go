package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

// TestDependencyCheckLocks: the lock a createTask holds on the tasks its new
// task depends on (while it checks them) lets a claim take a pending one
// at once, and holds back its resolution until the create commits.
func TestDependencyCheckLocks(t *testing.T) {
	t.Parallel()
	url := os.Getenv("HOPPER_TEST_POSTGRES")
	if url == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to test against")
	}
	schema := fmt.Sprintf("hopper_locks_%d", time.Now().UnixNano()%1e9)
	db, err := Open(context.Background(), url, Options{Schema: schema, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = db.Close()
		if conn, err := pgx.Connect(context.Background(), url); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	ctx := context.Background()
	now := storetest.Epoch
	for _, id := range []string{"claimed-dep", "pending-dep"} {
		_, err := db.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: storetest.NewTask("prov/locks", now), Now: now})
		require.NoError(t, err)
	}
	claim := func(count int) *store.ClaimResult {
		res, err := db.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: "prov/locks", WorkerGroup: "wg", WorkerID: "w",
			Count: count, Now: now, TakenUntil: now.Add(time.Hour)})
		require.NoError(t, err)
		return res
	}
	// Claimed in creation order: claimed-dep is running from here on.
	first := claim(1)
	require.Len(t, first.Claims, 1)
	require.Equal(t, "claimed-dep", first.Claims[0].Task.TaskID)

	// A create's dependency check, held open.
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT task_id FROM tasks WHERE task_id IN ('claimed-dep', 'pending-dep')"+dialect(nil, nil, 0).LockShare)
	require.NoError(t, err)

	// The pending dependency is claimable meanwhile...
	got := claim(1)
	require.Len(t, got.Claims, 1, "a claim must not skip a task a create is checking")
	require.Equal(t, "pending-dep", got.Claims[0].Task.TaskID)

	// ...but a dependency does not resolve until the create commits.
	resolved := make(chan error, 1)
	go func() {
		_, err := db.UpdateTask(ctx, store.UpdateTaskParams{TaskID: "claimed-dep", Now: now,
			Apply: func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(0, now, tr) }})
		resolved <- err
	}()
	select {
	case err := <-resolved:
		t.Fatalf("a dependency resolved while a create held it: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit(ctx))
	select {
	case err := <-resolved:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the resolution did not proceed after the create committed")
	}
}
