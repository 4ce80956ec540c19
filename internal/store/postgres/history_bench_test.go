package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

// execIn runs statements in a schema on a connection of its own.
func execIn(tb testing.TB, url, schema string, statements ...string) {
	tb.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(tb, err)
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(tb, err)
	defer conn.Close(ctx)
	for _, st := range statements {
		_, err := conn.Exec(ctx, st)
		require.NoError(tb, err, "%s", st)
	}
}

// openHistory opens a store on a fresh schema, without the history's
// indexes unless history is set.
func openHistory(b *testing.B, history bool) (*store.DB, string, string) {
	url := testURL(b)
	schema := newSchema(b, url)
	s := openSchema(b, url, schema, 4)
	if !history {
		var drops []string
		for _, idx := range storetest.HistoryIndexes {
			drops = append(drops, "DROP INDEX "+idx)
		}
		execIn(b, url, schema, drops...)
	}
	return s, url, schema
}

// BenchmarkHistoryCost: what finding past tasks costs each task, with
// migration 013's indexes against without (storetest.BenchHistoryCost):
// its createTask on an empty store and on one holding 100,000 tasks, and
// its whole life (createTask, claimWork, reportCompleted).
func BenchmarkHistoryCost(b *testing.B) {
	for _, c := range []struct {
		name    string
		prefill int
		life    bool
	}{{"create/tasks=0", 0, false}, {"create/tasks=100000", 100_000, false}, {"life/tasks=0", 0, true}} {
		b.Run(c.name, func(b *testing.B) {
			with, url, withSchema := openHistory(b, true)
			without, _, withoutSchema := openHistory(b, false)
			storetest.BenchHistoryCost(b, with, without, bulkFiller(url, withSchema), bulkFiller(url, withoutSchema), c.prefill, c.life)
		})
	}
}

// BenchmarkListTasksMillion measures a page (100 tasks) of each kind of
// task-history query (store.HistoryStore.ListTasks, behind GET
// /api/hopper/v1/tasks) on a table of a million tasks (HOPPER_BENCH_TASKS
// to change it) shaped as docs/history.md says: 89% completed, 5% failed,
// 3% exception, 1.5% pending, 1% running, 0.5% unscheduled; 50 queues;
// groups of 100; one task a second; names "build mac N", "build linux N",
// "test linux N", "test mac N", "lint N" in turn. Filling takes minutes;
// run it alone, with -benchtime=20x or so.
func BenchmarkListTasksMillion(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("HOPPER_BENCH_TASKS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	s, url, schema := openHistory(b, true)
	ctx := context.Background()
	seed := storetest.NewTask("bench/q0", storetest.Epoch)
	_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: "seed", Task: seed, Now: storetest.Epoch})
	require.NoError(b, err)
	base := storetest.Epoch.UnixMilli()
	began := time.Now()
	// Copies of the seed's definition and runs: the columns the queries
	// read and filter on differ, the JSON each row decodes is the same size.
	execIn(b, url, schema, fmt.Sprintf(`INSERT INTO tasks (task_id, task_queue_id, scheduler_id, project_id, task_group_id, requires, priority,
			deadline, expires, definition, retries_left, runs, state, unresolved, created)
		SELECT lpad(g::text, 22, 'T'), 'bench/q' || (g %% 50), t.scheduler_id, t.project_id, 'G' || lpad((g / 100)::text, 21, '0'),
			t.requires, t.priority, t.deadline, t.expires, t.definition, t.retries_left, t.runs, s.state,
			CASE WHEN s.state IN ('pending', 'running', 'unscheduled') THEN 1 ELSE 0 END, %[2]d + g::bigint * 1000
		FROM tasks t CROSS JOIN generate_series(1, %[1]d) g
		CROSS JOIN LATERAL (SELECT CASE WHEN g %% 1000 < 890 THEN 'completed' WHEN g %% 1000 < 940 THEN 'failed'
			WHEN g %% 1000 < 970 THEN 'exception' WHEN g %% 1000 < 985 THEN 'pending' WHEN g %% 1000 < 995 THEN 'running'
			ELSE 'unscheduled' END AS state) s
		WHERE t.task_id = 'seed'`, n, base),
		fmt.Sprintf(`INSERT INTO task_group_members (task_group_id, task_id, expires, created, task_queue_id, name)
		SELECT 'G' || lpad((g / 100)::text, 21, '0'), lpad(g::text, 22, 'T'), t.expires, %[2]d + g::bigint * 1000, 'bench/q' || (g %% 50),
			(ARRAY['build mac', 'build linux', 'test linux', 'test mac', 'lint'])[g %% 5 + 1] || ' ' || g
		FROM tasks t CROSS JOIN generate_series(1, %[1]d) g WHERE t.task_id = 'seed'`, n, base),
		"VACUUM ANALYZE tasks", "VACUUM ANALYZE task_group_members")
	b.Logf("filled %d tasks in %s", n, time.Since(began))

	at := func(g int) time.Time { return time.UnixMilli(base + int64(g)*1000).UTC() }
	day := 24 * time.Hour
	failed := store.TaskFilter{State: queue.StateFailed}
	// The 50th page of failed tasks: its token from walking there.
	page := store.Page{Limit: 100}
	for range 49 {
		_, next, err := s.ListTasks(ctx, failed, page)
		require.NoError(b, err)
		page.ContinuationToken = next
	}
	cases := []struct {
		name string
		f    store.TaskFilter
		page store.Page
	}{
		{"newest", store.TaskFilter{}, store.Page{}},
		{"state=failed", failed, store.Page{}},
		{"state=failed/page=50", failed, page},
		{"state=failed&queue", store.TaskFilter{State: queue.StateFailed, TaskQueueID: "bench/q7"}, store.Page{}},
		{"queue", store.TaskFilter{TaskQueueID: "bench/q7"}, store.Page{}},
		{"an-hour-midway", store.TaskFilter{CreatedFrom: at(n / 2), CreatedTo: at(n / 2).Add(time.Hour)}, store.Page{}},
		{"group", store.TaskFilter{TaskGroupID: fmt.Sprintf("G%021d", n/200)}, store.Page{}},
		{"name=build mac", store.TaskFilter{Name: "build mac"}, store.Page{}},
		{"state=failed&name=lint", store.TaskFilter{State: queue.StateFailed, Name: "lint"}, store.Page{}},
		{"state=pending", store.TaskFilter{State: queue.StatePending}, store.Page{}},
		{"name=absent&a-day", store.TaskFilter{Name: "nosuchword", CreatedFrom: at(n).Add(-day), CreatedTo: at(n)}, store.Page{}},
		{"name=absent", store.TaskFilter{Name: "nosuchword"}, store.Page{}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			c.page.Limit = 100
			for b.Loop() {
				got, _, err := s.ListTasks(ctx, c.f, c.page)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) == 0 && c.f.Name != "nosuchword" {
					b.Fatalf("%s found nothing", c.name)
				}
			}
		})
	}
}
