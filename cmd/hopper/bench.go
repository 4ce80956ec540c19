package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/bench"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// benchFlags are the flags of `hopper bench`.
type benchFlags struct {
	rootURL, db, only, backlogs, logLevel string
	dbBatches                             int
	asJSON, noDrain, serverProcess        bool
	opts                                  bench.Options
}

func benchCommand() *cobra.Command {
	var b benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a queue's throughput, claimWork wake-up latency and claim cost under backlog",
		Long: `Measure a hopper queue over its HTTP API, the way workers load it:

  lifecycle  --tasks tasks created by --creators concurrent clients while
             --workers workers claimWork (up to --batch tasks a call) and
             reportCompleted each with the claim's credentials: tasks/s.
  wake       a worker long-polls an empty queue, a task is created: the
             delay from the createTask reply to the claimWork reply.
  backlog    with --backlogs tasks pending, one worker's claimWork(1) +
             reportCompleted latency (flat is good).
  fleet      --fleet N idle workers long-poll an empty queue: the server's
             memory, the life-cycle rate beside them against without them,
             then one task each and the wake-up latency (off by default).

With --server-process the server runs as a child process and the life-cycle
reports CPU time per task of the server, of this client and of the
PostgreSQL backends apart (from /proc).

Either target a running deployment with --root-url (default
TASKCLUSTER_ROOT_URL) and TASKCLUSTER_CLIENT_ID / TASKCLUSTER_ACCESS_TOKEN
(/ TASKCLUSTER_CERTIFICATE); backlogs are then queued with concurrent
createTask calls and worked off afterwards. Or give --db (sqlite, sqlite:PATH,
or a postgres:// URL, in which a fresh database is created and dropped) to
run a server inside this process on a free port with a generated root token;
backlogs are then queued straight through the store.`,
		Args: cobra.NoArgs,
		RunE: b.run,
	}
	f, def := cmd.Flags(), bench.DefaultOptions()
	opts := &b.opts
	f.StringVar(&b.rootURL, "root-url", env("TASKCLUSTER_ROOT_URL", ""), "deployment to measure (TASKCLUSTER_ROOT_URL)")
	f.IntVar(&b.dbBatches, "db-batches", 0, "with --db on PostgreSQL: concurrent combined transactions (0: the default; -1: none)")
	f.StringVar(&b.db, "db", "", "run an in-process server on this store instead: sqlite, sqlite:PATH or a postgres:// URL")
	f.StringVar(&b.only, "only", "", "comma-separated benchmarks to run: lifecycle, wake, backlog, fleet (default all but fleet)")
	f.IntVar(&opts.Tasks, "tasks", def.Tasks, "life-cycle: tasks")
	f.IntVar(&opts.Creators, "creators", def.Creators, "life-cycle: concurrent createTask loops")
	f.IntVar(&opts.Workers, "workers", def.Workers, "life-cycle and drain: concurrent workers")
	f.IntVar(&opts.ClaimBatch, "batch", def.ClaimBatch, "tasks asked for per claimWork (1-32)")
	f.IntVar(&opts.Fleet, "fleet", 0, "fleet: idle workers to hold long-polling while the life-cycle runs (alone, it runs only the fleet benchmark)")
	f.DurationVar(&opts.FleetIdle, "fleet-idle", def.FleetIdle, "fleet: how long the fleet only waits before the server's memory is read")
	f.BoolVar(&b.serverProcess, "server-process", false, "with --db: run the server as a child process, so its CPU time per task and memory are reported apart")
	f.IntVar(&opts.WakeSamples, "wake-samples", def.WakeSamples, "wake: samples")
	f.StringVar(&b.backlogs, "backlogs", formatSizes(def.Backlogs), "backlog: comma-separated pending-queue sizes")
	f.IntVar(&opts.BacklogSamples, "backlog-samples", def.BacklogSamples, "backlog: claim+complete cycles timed per size")
	f.IntVar(&opts.PrefillConcurrency, "prefill-concurrency", def.PrefillConcurrency, "backlog: concurrent createTask calls when queueing over HTTP")
	f.BoolVar(&b.noDrain, "no-drain", false, "with --root-url: leave the rest of each backlog pending instead of working it off")
	f.StringVar(&opts.ProvisionerID, "provisioner-id", def.ProvisionerID, "provisionerId of the benchmark's task queues")
	f.BoolVar(&b.asJSON, "json", false, "print the report as JSON")
	f.StringVar(&b.logLevel, "log-level", defaultLogLevel, "progress logging: debug, info, warn or error")
	return cmd
}

// run measures the target and prints the report.
func (b *benchFlags) run(cmd *cobra.Command, _ []string) error {
	ctx, cancel := signalContext()
	defer cancel()
	opts := b.opts
	switch {
	case b.only != "":
		opts.Benchmarks = strings.Split(b.only, ",")
	case opts.Fleet > 0:
		opts.Benchmarks = []string{bench.Fleet}
	}
	sizes, err := parseSizes(b.backlogs)
	if err != nil {
		return err
	}
	opts.Backlogs = sizes
	log := newLogger(b.logLevel)
	opts.Logf = func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	var target string
	switch {
	case b.db != "" && cmd.Flags().Changed("root-url"):
		return errors.New("give either --root-url or --db, not both")
	case b.db != "":
		srv, err := b.startServer(ctx)
		if err != nil {
			return err
		}
		defer srv.Close()
		opts.Processes = srv.Processes
		opts.RootURL, opts.Credentials = srv.RootURL, srv.Credentials
		opts.Prefill, opts.PrefillMethod = srv.Prefill, srv.PrefillMethod()
		target = fmt.Sprintf("in-process hopper on %s at %s", srv.Kind, srv.RootURL)
		if b.serverProcess {
			target = fmt.Sprintf("hopper serve (pid %d) on %s at %s", srv.ServerPID(), srv.Kind, srv.RootURL)
		}
	default:
		if b.rootURL == "" {
			return errors.New("no queue to measure: give --root-url (or TASKCLUSTER_ROOT_URL), or --db to start one in-process")
		}
		opts.RootURL = b.rootURL
		if id := os.Getenv("TASKCLUSTER_CLIENT_ID"); id != "" {
			opts.Credentials = &tcclient.Credentials{ClientID: id, AccessToken: os.Getenv("TASKCLUSTER_ACCESS_TOKEN"),
				Certificate: os.Getenv("TASKCLUSTER_CERTIFICATE")}
		}
		opts.DrainBacklog = !b.noDrain
		target = b.rootURL
	}
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if b.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "hopper bench: %s\n\n", target)
	return rep.WriteTable(out)
}

// startServer starts the server of --db: in this process, or as a child
// `hopper serve` with --server-process.
func (b *benchFlags) startServer(ctx context.Context) (*bench.InProcess, error) {
	inOpts := bench.InProcessOptions{DB: b.db, Logger: newLogger("warn"), DBBatches: b.dbBatches}
	if b.serverProcess {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the hopper executable: %w", err)
		}
		inOpts.ServerCommand = []string{exe, "serve"}
	}
	return bench.StartInProcess(ctx, inOpts)
}

// formatSizes is the text of sizes that parseSizes reads.
func formatSizes(sizes []int) string {
	parts := make([]string, len(sizes))
	for i, n := range sizes {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// parseSizes parses "1000,100000" (underscores allowed: 100_000).
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.ReplaceAll(strings.TrimSpace(part), "_", "")
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--backlogs: %q is not a positive number", part)
		}
		out = append(out, n)
	}
	return out, nil
}
