package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunFleetSmall holds a small idle fleet beside the life-cycle on
// in-process servers: every waiting worker gets a task of its own, and the
// report says so. (The database's CPU is read where it is a process of
// its own: PostgreSQL's backends.)
func TestRunFleetSmall(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			opts := Options{
				RootURL: srv.RootURL, Credentials: srv.Credentials, Benchmarks: []string{Fleet},
				Fleet: 40, Tasks: 40, Creators: 2, Workers: 2, ClaimBatch: 4, Processes: srv.Processes,
			}
			var progress bytes.Buffer
			opts.Logf = func(format string, args ...any) { fmt.Fprintf(&progress, format+"\n", args...) }
			rep, err := Run(ctx, opts)
			require.NoError(t, err, "progress:\n%s", progress.String())
			f := rep.Fleet
			require.NotNil(t, f)
			require.Equal(t, 40, f.Woken, "every waiting worker gets a task")
			require.Equal(t, 40, f.Wake.Samples)
			require.Equal(t, 40, f.Beside.Tasks)
			require.Equal(t, 40, f.Alone.Tasks)
			require.Zero(t, f.IdleRSS, "an in-process server's memory is not told apart")
			if kind == "postgres" {
				require.GreaterOrEqual(t, f.Beside.CPU.Database, time.Duration(0), "PostgreSQL's backends are measured")
			} else {
				require.Negative(t, f.Beside.CPU.Database, "SQLite has no process of its own")
			}
			var table bytes.Buffer
			require.NoError(t, rep.WriteTable(&table))
			require.Contains(t, table.String(), "40 of 40 woken")
		})
	}
}

// TestProcessStats reads this process's CPU time and memory from /proc,
// and nothing for a process that does not exist.
func TestProcessStats(t *testing.T) {
	if _, ok := processCPU(1 << 30); ok {
		t.Fatal("a process that does not exist has no CPU time")
	}
	if _, _, ok := processRSS(1 << 30); ok {
		t.Fatal("a process that does not exist has no memory")
	}
	self := os.Getpid()
	before, ok := processCPU(self)
	if !ok {
		t.Skip("no /proc on this system")
	}
	// Spin until the kernel's counter (10 ms ticks) moves; a loaded
	// machine may give this process little of a core.
	after := before
	for start := time.Now(); after == before && time.Since(start) < 30*time.Second; {
		after, _ = processCPU(self)
	}
	require.Greater(t, after, before, "spinning costs CPU time")
	rss, peak, ok := processRSS(self)
	require.True(t, ok)
	require.Positive(t, rss)
	require.GreaterOrEqual(t, peak, rss)
}
