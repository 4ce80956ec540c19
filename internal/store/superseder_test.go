package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

var pgSchemaCounter atomic.Int64

// drivers opens a fresh store per driver: SQLite always, PostgreSQL when
// HOPPER_TEST_POSTGRES names a server.
func drivers() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hopper.db"))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(t *testing.T) store.Store {
			url := os.Getenv("HOPPER_TEST_POSTGRES")
			if url == "" {
				t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to test against")
			}
			schema := fmt.Sprintf("hopper_sup_%d_%d", time.Now().UnixNano()%1e9, pgSchemaCounter.Add(1))
			db, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema, MaxConns: 4})
			require.NoError(t, err)
			t.Cleanup(func() {
				db.Close()
				if conn, err := pgx.Connect(context.Background(), url); err == nil {
					_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
					conn.Close(context.Background())
				}
			})
			return db
		},
	}
}

// TestPendingWithRoute checks the built-in superseder's candidate query:
// only pending, claimable tasks of the queue with exactly that route, in
// creation order with taskId ties, and the limit keeping the most recently
// queued ones.
func TestPendingWithRoute(t *testing.T) {
	t.Parallel()
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := open(t)
			epoch := storetest.Epoch
			// A key with every character LIKE or JSON encoding treats
			// specially.
			const odd = `coalesce.v1.a%b_c&<d>"e\f`
			create := func(id, taskQueueID string, created time.Duration, routes ...string) {
				def := storetest.NewTask(taskQueueID, epoch.Add(created), func(tk *queue.Task) {
					tk.Routes = routes
					tk.Deadline = queue.NewTime(epoch.Add(time.Hour))
				})
				_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: def, Now: epoch.Add(created)})
				require.NoError(t, err)
			}
			// Creation order differs from queueing order on purpose.
			create("cccccccccccccccccccccA", "prov/wt", 3*time.Second, "coalesce.v1.k")
			create("aaaaaaaaaaaaaaaaaaaaaA", "prov/wt", 1*time.Second, "other", "coalesce.v1.k")
			create("bbbbbbbbbbbbbbbbbbbbbA", "prov/wt", 2*time.Second, "coalesce.v1.k")
			create("BBBBBBBBBBBBBBBBBBBBBA", "prov/wt", 2*time.Second, "coalesce.v1.k") // tie on created
			create("dddddddddddddddddddddA", "prov/wt", 4*time.Second, "coalesce.v1.kk")
			create("eeeeeeeeeeeeeeeeeeeeeA", "prov/wt", 5*time.Second, "coalesce.v1.K")
			create("fffffffffffffffffffffA", "prov/other", 6*time.Second, "coalesce.v1.k")
			create("gggggggggggggggggggggA", "prov/wt", 7*time.Second, "coalesce.v1.k")
			create("hhhhhhhhhhhhhhhhhhhhhA", "prov/wt", 8*time.Second, odd)
			create("iiiiiiiiiiiiiiiiiiiiiA", "prov/wt", 9*time.Second, `coalesce.v1.aXbYc&<d>"e\f`)
			// g is running, so it is no candidate.
			_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: "gggggggggggggggggggggA", Now: epoch.Add(10 * time.Second),
				Apply: func(tk *queue.TaskState, tr *queue.Transition) error {
					return tk.Claim(0, "wg", "w1", epoch.Add(10*time.Second), epoch.Add(time.Minute), tr)
				}})
			require.NoError(t, err)

			ids := func(entries []store.PendingEntry) []string {
				out := []string{}
				for _, e := range entries {
					out = append(out, e.Task.TaskID)
					require.Equal(t, 0, e.RunID)
					require.Equal(t, e.Task.Runs[0].Scheduled.Time, e.Inserted)
				}
				return out
			}
			tests := []struct {
				name, queue, route string
				now                time.Duration
				limit              int
				want               []string
			}{
				{name: "all candidates in creation order", queue: "prov/wt", route: "coalesce.v1.k", now: 20 * time.Second,
					want: []string{"aaaaaaaaaaaaaaaaaaaaaA", "BBBBBBBBBBBBBBBBBBBBBA", "bbbbbbbbbbbbbbbbbbbbbA", "cccccccccccccccccccccA"}},
				{name: "limit keeps the most recently queued", queue: "prov/wt", route: "coalesce.v1.k", now: 20 * time.Second, limit: 1,
					want: []string{"cccccccccccccccccccccA"}},
				{name: "other queue", queue: "prov/other", route: "coalesce.v1.k", now: 20 * time.Second,
					want: []string{"fffffffffffffffffffffA"}},
				{name: "case matters", queue: "prov/wt", route: "coalesce.v1.K", now: 20 * time.Second,
					want: []string{"eeeeeeeeeeeeeeeeeeeeeA"}},
				{name: "wildcards and escapes are literal", queue: "prov/wt", route: odd, now: 20 * time.Second,
					want: []string{"hhhhhhhhhhhhhhhhhhhhhA"}},
				{name: "no match", queue: "prov/wt", route: "coalesce.v1.none", now: 20 * time.Second, want: []string{}},
				{name: "deadline passed", queue: "prov/wt", route: "coalesce.v1.k", now: 2 * time.Hour, want: []string{}},
			}
			for _, tt := range tests {
				got, err := s.PendingWithRoute(ctx, store.PendingWithRouteParams{TaskQueueID: tt.queue, Route: tt.route, Now: epoch.Add(tt.now), Limit: tt.limit})
				require.NoError(t, err, tt.name)
				require.Equal(t, tt.want, ids(got), tt.name)
			}
		})
	}
}
