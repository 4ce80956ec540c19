package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted on purpose
	}
	cases := []struct {
		name    string
		samples []time.Duration
		want    Latency
	}{
		{name: "empty", samples: nil, want: Latency{}},
		{name: "one", samples: ms(7), want: Latency{Samples: 1, Min: 7 * time.Millisecond, P50: 7 * time.Millisecond,
			P90: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond, Mean: 7 * time.Millisecond}},
		{name: "four", samples: ms(4, 1, 3, 2), want: Latency{Samples: 4, Min: time.Millisecond, P50: 2 * time.Millisecond,
			P90: 4 * time.Millisecond, P99: 4 * time.Millisecond, Max: 4 * time.Millisecond, Mean: 2500 * time.Microsecond}},
		{name: "hundred", samples: ms(hundred...), want: Latency{Samples: 100, Min: time.Millisecond, P50: 50 * time.Millisecond,
			P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond, Mean: 50500 * time.Microsecond}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, summarize(c.samples))
		})
	}
}

func TestOptionsRejectNonsense(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{name: "no root URL", opts: Options{}, want: "root URL"},
		{name: "unknown benchmark", opts: Options{RootURL: "http://x", Benchmarks: []string{"speed"}}, want: "unknown benchmark"},
		{name: "batch above 32", opts: Options{RootURL: "http://x", ClaimBatch: 33}, want: "at most 32"},
		{name: "backlog smaller than samples", opts: Options{RootURL: "http://x", Backlogs: []int{10}, BacklogSamples: 20}, want: "cannot supply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Run(context.Background(), c.opts)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// quietLogger keeps in-process servers from printing during tests.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer starts an in-process server for the store kind, skipping when
// PostgreSQL is wanted but HOPPER_TEST_POSTGRES is unset.
func startServer(tb testing.TB, kind string) *InProcess {
	tb.Helper()
	db := "sqlite"
	if kind == "postgres" {
		db = os.Getenv("HOPPER_TEST_POSTGRES")
		if db == "" {
			tb.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to benchmark against")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := StartInProcess(ctx, InProcessOptions{DB: db, Logger: quietLogger()})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, srv.Close()) })
	return srv
}

// TestRunSmall runs every benchmark at a tiny size against in-process
// servers and checks that the report holds plausible figures and that the
// backlog was really worked off.
func TestRunSmall(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			opts := Options{
				RootURL: srv.RootURL, Credentials: srv.Credentials,
				Tasks: 60, Creators: 3, Workers: 3, ClaimBatch: 4,
				WakeSamples: 5, Backlogs: []int{20, 50}, BacklogSamples: 10,
				Prefill: srv.Prefill, PrefillMethod: srv.PrefillMethod(), DrainBacklog: true,
			}
			var progress bytes.Buffer
			opts.Logf = func(format string, args ...any) { fmt.Fprintf(&progress, format+"\n", args...) }
			rep, err := Run(ctx, opts)
			require.NoError(t, err, "progress:\n%s", progress.String())

			require.NotNil(t, rep.Lifecycle)
			require.Equal(t, 60, rep.Lifecycle.Tasks)
			require.Positive(t, rep.Lifecycle.TasksPerSecond())
			require.LessOrEqual(t, rep.Lifecycle.CreateElapsed, rep.Lifecycle.Elapsed)
			require.GreaterOrEqual(t, rep.Lifecycle.ClaimCalls, int64(60/4))

			require.NotNil(t, rep.Wake)
			require.Equal(t, 5, rep.Wake.FromReply.Samples)
			// Far below the 20 s long-poll: each sample was woken.
			require.Less(t, rep.Wake.FromReply.Max, 5*time.Second)
			require.GreaterOrEqual(t, rep.Wake.FromRequest.Min, rep.Wake.FromReply.Min)

			require.Len(t, rep.Backlog, 2)
			for i, b := range rep.Backlog {
				require.Equal(t, []int{20, 50}[i], b.Backlog)
				require.Equal(t, 10, b.Cycle.Samples)
				require.Positive(t, b.Cycle.P50)
				require.Contains(t, b.PrefillMethod, "store")
			}

			var table bytes.Buffer
			require.NoError(t, rep.WriteTable(&table))
			for _, want := range []string{"life-cycle", "tasks/s", "wake", "claim cost", "backlog 50 vs 20"} {
				require.Contains(t, table.String(), want)
			}
		})
	}
}

func TestPrefillRejectsBadTaskQueue(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "sqlite")
	for _, tq := range []string{"/no-provisioner", "prov/Upper", "noslash", ""} {
		require.ErrorContains(t, srv.Prefill(context.Background(), tq, 1), "not a valid taskQueueId", tq)
	}
}

// TestBacklogOverHTTPDrains pre-fills over HTTP (the path used against a
// remote deployment) and checks that the drain leaves the queue empty.
func TestBacklogOverHTTPDrains(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "sqlite")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := Options{RootURL: srv.RootURL, Credentials: srv.Credentials, ProvisionerID: "drain-check",
		BacklogSamples: 5, PrefillConcurrency: 4, Workers: 3, ClaimBatch: 7, DrainBacklog: true}
	res, err := RunBacklog(ctx, opts, 40)
	require.NoError(t, err)
	require.Contains(t, res.PrefillMethod, "HTTP")

	c := &tcclient.Client{RootURL: srv.RootURL, Credentials: srv.Credentials}
	var list struct {
		TaskQueues []struct {
			TaskQueueID string `json:"taskQueueId"`
		} `json:"taskQueues"`
	}
	require.NoError(t, c.Do(ctx, "GET", "/task-queues", nil, nil, &list))
	require.Len(t, list.TaskQueues, 1)
	counts, err := c.TaskQueueCounts(ctx, list.TaskQueues[0].TaskQueueID)
	require.NoError(t, err)
	require.Zero(t, counts.PendingTasks)
	require.Zero(t, counts.ClaimedTasks)
}

// The Go benchmarks run the same measurements against in-process servers on
// SQLite and on PostgreSQL (HOPPER_TEST_POSTGRES, in a fresh database that
// is dropped afterwards). Each reports its figure as a custom metric:
//
//	go test ./internal/bench -run '^$' -bench . -benchtime 2000x   # life-cycle: b.N tasks
//	go test ./internal/bench -run '^$' -bench Wake -benchtime 200x
//	go test ./internal/bench -run '^$' -bench Backlog -benchtime 200x
//
// Backlogs are queued through the store directly (InProcess.Prefill), before
// the timer starts and topped up by b.N before each run, so the queue holds
// the named backlog throughout the timed loop.

func forEachStore(b *testing.B, fn func(b *testing.B, srv *InProcess)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			fn(b, startServer(b, kind))
		})
	}
}

func benchOptions(srv *InProcess) Options {
	return Options{RootURL: srv.RootURL, Credentials: srv.Credentials, Prefill: srv.Prefill, PrefillMethod: srv.PrefillMethod()}
}

// BenchmarkLifecycle runs the default shape (8 creators, 8 workers) and a
// decision-task shape: Taskcluster's taskgraph creates a graph's tasks 50 at
// a time, so 64 concurrent creators.
func BenchmarkLifecycle(b *testing.B) {
	forEachStore(b, func(b *testing.B, srv *InProcess) {
		for _, shape := range []struct{ creators, workers int }{{8, 8}, {64, 8}} {
			b.Run(fmt.Sprintf("c%dw%d", shape.creators, shape.workers), func(b *testing.B) {
				opts := benchOptions(srv)
				opts.Tasks = b.N
				opts.Creators, opts.Workers = shape.creators, shape.workers
				res, err := RunLifecycle(b.Context(), opts)
				require.NoError(b, err)
				b.ReportMetric(res.TasksPerSecond(), "tasks/s")
			})
		}
	})
}

func BenchmarkWake(b *testing.B) {
	forEachStore(b, func(b *testing.B, srv *InProcess) {
		b.Run("wake", func(b *testing.B) {
			opts := benchOptions(srv)
			opts.WakeSamples = b.N
			res, err := RunWake(b.Context(), opts)
			require.NoError(b, err)
			b.ReportMetric(float64(res.FromReply.P50)/1e6, "p50-ms")
			b.ReportMetric(float64(res.FromReply.P99)/1e6, "p99-ms")
		})
	})
}

func BenchmarkBacklog(b *testing.B) {
	forEachStore(b, func(b *testing.B, srv *InProcess) {
		for _, size := range []int{1000, 100000} {
			opts := benchOptions(srv)
			require.NoError(b, opts.defaults())
			tq := opts.taskQueue(fmt.Sprintf("gobl%d", size))
			queued := 0
			b.Run(fmt.Sprintf("backlog=%d", size), func(b *testing.B) {
				ctx := b.Context()
				// Top up so the backlog never drops below size while timed.
				if add := size + b.N - queued; add > 0 {
					require.NoError(b, srv.Prefill(ctx, tq, add))
					queued += add
				}
				c := opts.client()
				req := &tcclient.ClaimWorkRequest{WorkerGroup: "bench", WorkerID: "gobl", Tasks: 1}
				samples := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					t0 := time.Now()
					resp, err := c.ClaimWork(ctx, tq, req)
					require.NoError(b, err)
					require.Len(b, resp.Tasks, 1)
					claim := resp.Tasks[0]
					creds := claim.Credentials
					_, err = c.WithCredentials(&creds).ReportCompleted(ctx, claim.Status.TaskID, claim.RunID)
					require.NoError(b, err)
					samples = append(samples, time.Since(t0))
				}
				b.StopTimer()
				queued -= b.N
				l := summarize(samples)
				b.ReportMetric(float64(l.P50)/1e6, "p50-ms")
				b.ReportMetric(float64(l.P99)/1e6, "p99-ms")
			})
		}
	})
}
