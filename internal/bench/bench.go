// Package bench measures a hopper queue over its HTTP API, the way workers
// and schedulers load it: the full task life-cycle throughput, how quickly a
// waiting claimWork is woken by a new task, and whether the cost of a claim
// stays flat as the pending backlog grows.
//
// Every measurement goes through the public Queue API with the official
// request shapes (internal/tcclient: Hawk-signed, the claim's temporary
// credentials for reportCompleted), so Run works against any running hopper
// (or Taskcluster queue) given a root URL and credentials. StartInProcess
// runs a hopper server inside the calling process for `hopper bench --db`
// and the Go benchmarks, and adds a fast backlog pre-fill straight into the
// store.
//
// Each benchmark uses task queues of its own (provisionerId Options.
// ProvisionerID, a random workerType), so it never touches real work; tasks
// it creates expire a day after their deadline.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Names of the benchmarks, for Options.Benchmarks.
const (
	// Lifecycle is the create → claimWork → reportCompleted throughput.
	Lifecycle = "lifecycle"
	// Wake is the latency from a task's creation to a waiting claimWork's
	// reply.
	Wake = "wake"
	// Backlog is the claimWork(1)+reportCompleted latency with large
	// numbers of pending tasks queued.
	Backlog = "backlog"
)

// All lists every benchmark in the order Run performs them.
var All = []string{Lifecycle, Wake, Backlog, Fleet}

// Standard is what Run performs unless told otherwise: all but the fleet,
// which needs Options.Fleet.
var Standard = []string{Lifecycle, Wake, Backlog}

// PrefillFunc puts n pending tasks into a task queue by some faster path
// than createTask over HTTP (StartInProcess supplies one that writes
// through the store). It must leave the tasks claimable in creation order.
type PrefillFunc func(ctx context.Context, taskQueueID string, n int) error

// Options configure Run. Zero values choose the defaults noted.
type Options struct {
	// RootURL is the deployment to measure (required).
	RootURL string
	// Credentials sign every request but reportCompleted (which uses the
	// claim's temporary credentials). They need queue:create-task:*,
	// queue:claim-work:<provisionerId>/*, queue:worker-id:<workerGroup>/*
	// and queue:scheduler-id:- (or "*"). nil sends unsigned requests.
	Credentials *tcclient.Credentials
	// HTTPClient is shared by every simulated client; the default keeps
	// enough idle connections for all of them.
	HTTPClient *http.Client
	// ProvisionerID names the benchmark's task queues (default
	// "hopper-bench"); WorkerGroup its workers (default "bench").
	ProvisionerID string
	WorkerGroup   string
	// Benchmarks selects what runs (default All).
	Benchmarks []string

	// Tasks is the number of tasks of the life-cycle benchmark (default
	// 2000), made by Creators concurrent createTask loops (default 8) and
	// worked by Workers concurrent claimWork/reportCompleted loops (default
	// 8), each claiming up to ClaimBatch tasks a call (default 32, max 32).
	Tasks      int
	Creators   int
	Workers    int
	ClaimBatch int

	// Fleet is the number of idle workers the fleet benchmark holds;
	// FleetIdle how long they only wait before the server's memory is
	// read (default 5 s).
	Fleet     int
	FleetIdle time.Duration

	// WakeSamples is the number of wake-up measurements (default 200).
	WakeSamples int

	// Backlogs are the pending-queue sizes the claim cost is measured at
	// (default 1000 and 100000); BacklogSamples the claim+complete cycles
	// timed at each (default 200, at most the backlog).
	Backlogs       []int
	BacklogSamples int
	// Prefill fills the backlog queues; nil creates the tasks with
	// PrefillConcurrency concurrent createTask calls (default 32).
	Prefill            PrefillFunc
	PrefillMethod      string // how Prefill works, for the report
	PrefillConcurrency int
	// DrainBacklog claims and completes what is left of each backlog after
	// its measurement, so a shared deployment is not left with pending
	// benchmark tasks. In-process runs, whose database is thrown away, skip
	// it.
	DrainBacklog bool

	// Processes, if set, names the server's and the database's processes
	// on this machine, whose CPU time per task the life-cycle benchmark
	// reports beside this process's own.
	Processes Processes

	// Logf, if set, receives progress lines.
	Logf func(format string, args ...any)
}

// Report holds the results of Run; a benchmark that did not run is nil.
type Report struct {
	RootURL   string
	Lifecycle *LifecycleResult
	Wake      *WakeResult
	Backlog   []BacklogResult
	Fleet     *FleetResult
}

// DefaultOptions are the settings Run takes for those left zero (and
// `hopper bench` shows as its flags' defaults).
func DefaultOptions() Options {
	return Options{
		ProvisionerID: "hopper-bench", WorkerGroup: "bench",
		Tasks: 2000, Creators: 8, Workers: 8, ClaimBatch: 32,
		FleetIdle:   5 * time.Second,
		WakeSamples: 200,
		Backlogs:    []int{1000, 100000}, BacklogSamples: 200, PrefillConcurrency: 32,
	}
}

func (o *Options) defaults() error {
	if o.RootURL == "" {
		return errors.New("bench: a root URL is required")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	d := DefaultOptions()
	if o.ProvisionerID == "" {
		o.ProvisionerID = d.ProvisionerID
	}
	if o.WorkerGroup == "" {
		o.WorkerGroup = d.WorkerGroup
	}
	if len(o.Benchmarks) == 0 {
		o.Benchmarks = Standard
	}
	for _, b := range o.Benchmarks {
		if !slices.Contains(All, b) {
			return fmt.Errorf("bench: unknown benchmark %q (want one of %v)", b, All)
		}
	}
	setDefault(&o.Tasks, d.Tasks)
	setDefault(&o.Creators, d.Creators)
	setDefault(&o.Workers, d.Workers)
	setDefault(&o.ClaimBatch, d.ClaimBatch)
	if o.ClaimBatch > 32 {
		return fmt.Errorf("bench: claimWork takes at most 32 tasks a call, not %d", o.ClaimBatch)
	}
	if slices.Contains(o.Benchmarks, Fleet) && o.Fleet <= 0 {
		return errors.New("bench: the fleet benchmark needs a fleet size")
	}
	if o.FleetIdle <= 0 {
		o.FleetIdle = d.FleetIdle
	}
	setDefault(&o.WakeSamples, d.WakeSamples)
	if len(o.Backlogs) == 0 {
		o.Backlogs = d.Backlogs
	}
	setDefault(&o.BacklogSamples, d.BacklogSamples)
	setDefault(&o.PrefillConcurrency, d.PrefillConcurrency)
	for _, n := range o.Backlogs {
		if n < o.BacklogSamples {
			return fmt.Errorf("bench: a backlog of %d cannot supply %d samples", n, o.BacklogSamples)
		}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

func setDefault(v *int, def int) {
	if *v <= 0 {
		*v = def
	}
}

// Run performs the selected benchmarks one after the other.
func Run(ctx context.Context, opts Options) (Report, error) {
	if err := opts.defaults(); err != nil {
		return Report{}, err
	}
	rep := Report{RootURL: opts.RootURL}
	if slices.Contains(opts.Benchmarks, Lifecycle) {
		r, err := RunLifecycle(ctx, opts)
		if err != nil {
			return rep, err
		}
		rep.Lifecycle = &r
	}
	if slices.Contains(opts.Benchmarks, Wake) {
		r, err := RunWake(ctx, opts)
		if err != nil {
			return rep, err
		}
		rep.Wake = &r
	}
	if slices.Contains(opts.Benchmarks, Backlog) {
		for _, n := range opts.Backlogs {
			r, err := RunBacklog(ctx, opts, n)
			if err != nil {
				return rep, err
			}
			rep.Backlog = append(rep.Backlog, r)
		}
	}
	if slices.Contains(opts.Benchmarks, Fleet) {
		r, err := RunFleet(ctx, opts)
		if err != nil {
			return rep, err
		}
		rep.Fleet = &r
	}
	return rep, nil
}

// client returns a queue client signing with the benchmark's credentials.
// Retries are off: a failed request is a benchmark failure, not something
// to hide in the timings.
func (o *Options) client() *tcclient.Client {
	return &tcclient.Client{RootURL: o.RootURL, Credentials: o.Credentials, HTTPClient: o.HTTPClient, MaxRetries: -1}
}

// taskQueue returns a fresh task queue id for one benchmark run.
func (o *Options) taskQueue(kind string) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return o.ProvisionerID + "/" + kind + "-" + string(b)
}

// taskDefinition is the benchmark's task: nothing to run, a deadline well
// past the benchmark, and an expiry soon after so a deployment's expiration
// removes it.
func taskDefinition(taskQueueID string, now time.Time, deadline time.Duration) *tcclient.TaskDefinition {
	return &tcclient.TaskDefinition{
		TaskQueueID: taskQueueID,
		Created:     tcclient.NewTime(now),
		Deadline:    tcclient.NewTime(now.Add(deadline)),
		Expires:     tcclient.NewTime(now.Add(deadline + 24*time.Hour)),
		Payload:     []byte("{}"),
		Metadata: tcclient.TaskMetadata{
			Name: "hopper bench", Description: "a benchmark task; it runs nothing",
			Owner: "hopper-bench@localhost", Source: "https://github.com/hopper-ci/hopper",
		},
	}
}
