package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

var schemaCounter atomic.Int64

// testURL returns HOPPER_TEST_POSTGRES or skips the test.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("HOPPER_TEST_POSTGRES")
	if url == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to test against")
	}
	return url
}

// newSchema names a fresh schema and drops it when the test ends (after
// the stores opened on it are closed: cleanups run last-registered first).
func newSchema(t testing.TB, url string) string {
	t.Helper()
	schema := fmt.Sprintf("hopper_test_%d_%d", time.Now().UnixNano()%1e9, schemaCounter.Add(1))
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	return schema
}

func openSchema(t testing.TB, url, schema string, maxConns int32) *store.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema, MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// openTestDB opens a store in a fresh schema of HOPPER_TEST_POSTGRES.
func openTestDB(t *testing.T) store.Store {
	t.Helper()
	url := testURL(t)
	return openSchema(t, url, newSchema(t, url), 4)
}

// openFixture opens n stores on one fresh schema, like n hopper replicas
// sharing a database.
func openFixture(t *testing.T, n int) storetest.Fixture {
	t.Helper()
	url := testURL(t)
	schema := newSchema(t, url)
	fx := storetest.Fixture{Fill: bulkFiller(url, schema)}
	for range n {
		fx.Stores = append(fx.Stores, openSchema(t, url, schema, 6))
	}
	return fx
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openTestDB)
}

func TestStoredFlow(t *testing.T) {
	t.Parallel()
	storetest.RunStoredFlow(t, func(t *testing.T) (store.Store, func() store.Store) {
		url := testURL(t)
		schema := newSchema(t, url)
		return openSchema(t, url, schema, 4), func() store.Store { return openSchema(t, url, schema, 4) }
	})
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	storetest.RunConcurrency(t, storetest.ConcurrencyOptions{
		Tasks:              2000,
		Claimers:           32,
		Open:               openFixture,
		CrossProcessWakeup: true,
	})
}

// taskCopyColumns are the columns of the tasks table a bulk fill copies.
const taskCopyColumns = `task_queue_id, scheduler_id, project_id, task_group_id, requires, priority, deadline, expires,
	definition, retries_left, runs, state, unresolved, taken_until, claimed_at, pending_since, flow_key, flow, created`

// bulkFiller copies a pending task n times (with its group membership) in one INSERT … SELECT, each
// copy taking the next pending sequence number, then refreshes the planner
// statistics as autovacuum would.
func bulkFiller(url, schema string) storetest.BulkFiller {
	return func(tb testing.TB, seedID string, n int) {
		tb.Helper()
		ctx := context.Background()
		cfg, err := pgx.ParseConfig(url)
		require.NoError(tb, err)
		cfg.RuntimeParams["search_path"] = schema
		conn, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(tb, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `INSERT INTO tasks (task_id, `+taskCopyColumns+`, pending_seq)
			SELECT t.task_id || '-' || g, `+taskCopyColumns+`, nextval('hopper_pending_seq')
			FROM tasks t CROSS JOIN generate_series(1, $1::int) g WHERE t.task_id = $2 ORDER BY g`, n, seedID)
		require.NoError(tb, err)
		_, err = conn.Exec(ctx, `INSERT INTO task_group_members (task_group_id, task_id, expires, created, task_queue_id, name)
			SELECT task_group_id, task_id || '-' || g, expires, created, task_queue_id, 'copy'
			FROM tasks t CROSS JOIN generate_series(1, $1::int) g WHERE t.task_id = $2`, n, seedID)
		require.NoError(tb, err)
		_, err = conn.Exec(ctx, "ANALYZE tasks")
		require.NoError(tb, err)
	}
}

func BenchmarkClaimWork(b *testing.B) {
	url := testURL(b)
	for _, pending := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			schema := newSchema(b, url)
			storetest.BenchClaimWork(b, openSchema(b, url, schema, 4), pending, bulkFiller(url, schema))
		})
	}
}

// BenchmarkFlowClaimWork: claims past a backlog held back by flow keys at
// their limits, and claims from the one key with room (flat is good).
func BenchmarkFlowClaimWork(b *testing.B) {
	url := testURL(b)
	for _, size := range []struct{ pending, keys int }{{1000, 10}, {100_000, 1000}} {
		for _, keyed := range []bool{false, true} {
			b.Run(fmt.Sprintf("pending=%d/keys=%d/keyed=%t", size.pending, size.keys, keyed), func(b *testing.B) {
				schema := newSchema(b, url)
				storetest.BenchFlowClaimWork(b, openSchema(b, url, schema, 4), size.pending, size.keys, keyed, bulkFiller(url, schema))
			})
		}
	}
}

func BenchmarkCreateClaimComplete(b *testing.B) {
	url := testURL(b)
	storetest.BenchCreateClaimComplete(b, openSchema(b, url, newSchema(b, url), 4))
}

// BenchmarkReportCompleted measures the store's part of reportCompleted
// for tasks without routes, tasks indexed at two paths and tasks with a
// notify route.
func BenchmarkReportCompleted(b *testing.B) {
	for name, routes := range map[string][]string{"plain": nil, "indexed": {"index.bench.latest", "index.bench.each.t%d"},
		// A notify route that does not fire on completion (its rules are
		// read, nothing is written), and one that does (one outbox row).
		"notify-silent": {"notify.email.dev%d@example.com.on-failed"}, "notify": {"notify.email.dev%d@example.com.on-completed"}} {
		b.Run(name, func(b *testing.B) {
			url := testURL(b)
			storetest.BenchReportCompleted(b, openSchema(b, url, newSchema(b, url), 4), routes)
		})
	}
}

// TestListenerReconnectWakesWaiters: announcements sent while the LISTEN
// connection is down are lost, so once it is back every waiter is woken to
// look for itself.
func TestListenerReconnectWakesWaiters(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	db := openSchema(t, url, schema, 4)
	ch, cancel := db.SubscribePending("prov/reconnect", 1)
	defer cancel()
	select {
	case <-ch:
		t.Fatal("woken before anything happened")
	case <-time.After(200 * time.Millisecond):
	}
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var killed int
	err = conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND query LIKE '%' || $1 || '%'`, schema).Scan(&killed)
	require.NoError(t, err)
	require.Equal(t, 1, killed, "the store's LISTEN connection")
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken after the listener reconnected")
	}
}

func TestUpgrade(t *testing.T) {
	t.Parallel()
	storetest.RunUpgrade(t, func(t *testing.T, version int) (func(string), func() store.Store) {
		url := testURL(t)
		schema := newSchema(t, url)
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SET search_path TO "+schema)
		require.NoError(t, err)
		all, err := postgres.Migrations()
		require.NoError(t, err)
		for _, m := range all {
			if m.Version <= version {
				_, err := conn.Exec(ctx, m.SQL)
				require.NoError(t, err, "migration %d", m.Version)
			}
		}
		// Recorded as the migrator records them, so opening the store
		// applies only the later ones.
		_, err = conn.Exec(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied BIGINT NOT NULL)`)
		require.NoError(t, err)
		for _, m := range all {
			if m.Version <= version {
				_, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version, name, applied) VALUES ($1, $2, 0)", m.Version, m.Name)
				require.NoError(t, err)
			}
		}
		exec := func(query string) {
			_, err := conn.Exec(ctx, query)
			require.NoError(t, err)
		}
		return exec, func() store.Store { return openSchema(t, url, schema, 4) }
	})
}

// TestReplicasMigrateTogether: replicas starting at once on a fresh
// database all open it (each migration applied once, by whichever comes
// first), as two `hopper serve` started together must.
func TestReplicasMigrateTogether(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	const replicas = 4
	errs := make(chan error, replicas)
	for range replicas {
		go func() {
			db, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, MaxConns: 2})
			if err == nil {
				err = db.Close()
			}
			errs <- err
		}()
	}
	for range replicas {
		require.NoError(t, <-errs)
	}
	all, err := postgres.Migrations()
	require.NoError(t, err)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT COUNT(*) FROM "+schema+".schema_migrations").Scan(&n))
	require.Equal(t, len(all), n)
}
