package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

// openFile opens a store on the database file, closed when the test ends.
func openFile(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

func openTestDB(t *testing.T) store.Store {
	t.Helper()
	return openFile(t, filepath.Join(t.TempDir(), "hopper.db"))
}

// openFixture opens one store on a fresh file, whatever the number of
// replicas asked for: several processes can share an SQLite file, but they
// take turns through SQLite's busy-wait sleeps, which is not how hopper is
// meant to scale, so the concurrency tests race goroutines in one process.
func openFixture(t *testing.T, _ int) storetest.Fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hopper.db")
	return storetest.Fixture{Stores: []store.Store{openFile(t, path)}, Fill: bulkFiller(path)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openTestDB)
}

func TestStoredFlow(t *testing.T) {
	t.Parallel()
	storetest.RunStoredFlow(t, func(t *testing.T) (store.Store, func() store.Store) {
		path := filepath.Join(t.TempDir(), "hopper.db")
		return openFile(t, path), func() store.Store { return openFile(t, path) }
	})
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	storetest.RunConcurrency(t, storetest.ConcurrencyOptions{
		Tasks:    2000,
		Claimers: 32,
		Open:     openFixture,
	})
}

// taskCopyColumns are the columns of the tasks table a bulk fill copies.
const taskCopyColumns = `task_queue_id, scheduler_id, project_id, task_group_id, requires, priority, deadline, expires,
	definition, retries_left, runs, state, unresolved, taken_until, claimed_at, flow_key, flow, created`

// bulkFiller copies a pending task n times (with its group membership) in one INSERT … SELECT on a
// second connection to the file, each copy queued behind the one before.
func bulkFiller(path string) storetest.BulkFiller {
	return func(tb testing.TB, seedID string, n int) {
		tb.Helper()
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		require.NoError(tb, err)
		defer db.Close()
		_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO tasks (task_id, `+taskCopyColumns+`, pending_seq, pending_since)
			SELECT t.task_id || '-' || n.i, `+taskCopyColumns+`, t.pending_seq + n.i, t.pending_since
			FROM tasks t, n WHERE t.task_id = ?`, n, seedID)
		require.NoError(tb, err)
		_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO task_group_members (task_group_id, task_id, expires, created, task_queue_id, name)
			SELECT task_group_id, t.task_id || '-' || n.i, expires, created, task_queue_id, 'copy' FROM tasks t, n WHERE t.task_id = ?`, n, seedID)
		require.NoError(tb, err)
	}
}

func BenchmarkClaimWork(b *testing.B) {
	for _, pending := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "hopper.db")
			storetest.BenchClaimWork(b, openFile(b, path), pending, bulkFiller(path))
		})
	}
}

// BenchmarkFlowClaimWork: see the PostgreSQL driver's.
func BenchmarkFlowClaimWork(b *testing.B) {
	for _, size := range []struct{ pending, keys int }{{1000, 10}, {100_000, 1000}} {
		for _, keyed := range []bool{false, true} {
			b.Run(fmt.Sprintf("pending=%d/keys=%d/keyed=%t", size.pending, size.keys, keyed), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "hopper.db")
				storetest.BenchFlowClaimWork(b, openFile(b, path), size.pending, size.keys, keyed, bulkFiller(path))
			})
		}
	}
}

func BenchmarkCreateClaimComplete(b *testing.B) {
	storetest.BenchCreateClaimComplete(b, openFile(b, filepath.Join(b.TempDir(), "hopper.db")))
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
			storetest.BenchReportCompleted(b, openFile(b, filepath.Join(b.TempDir(), "hopper.db")), routes)
		})
	}
}

func TestUpgrade(t *testing.T) {
	t.Parallel()
	storetest.RunUpgrade(t, func(t *testing.T, version int) (func(string), func() store.Store) {
		path := filepath.Join(t.TempDir(), "hopper.db")
		raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		require.NoError(t, err)
		t.Cleanup(func() { _ = raw.Close() })
		all, err := sqlite.Migrations()
		require.NoError(t, err)
		var ms []store.Migration
		for _, m := range all {
			if m.Version <= version {
				ms = append(ms, m)
			}
		}
		_, err = store.Migrate(context.Background(), raw, sqlite.Dialect, ms, nil)
		require.NoError(t, err)
		exec := func(query string) {
			_, err := raw.Exec(query)
			require.NoError(t, err)
		}
		return exec, func() store.Store {
			require.NoError(t, raw.Close())
			return openFile(t, path)
		}
	})
}

// BenchmarkWorkerStanding: storetest.BenchWorkerStanding (statements are
// counted on PostgreSQL only).
func BenchmarkWorkerStanding(b *testing.B) {
	storetest.BenchWorkerStanding(b, openFile(b, filepath.Join(b.TempDir(), "hopper.db")), nil)
}
