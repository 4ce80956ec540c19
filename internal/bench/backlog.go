package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// BacklogResult is the claim cost measured with Backlog tasks pending.
type BacklogResult struct {
	Backlog int
	// PrefillMethod says how the backlog was queued; PrefillElapsed how long
	// it took.
	PrefillMethod  string
	PrefillElapsed time.Duration
	// Cycle is the latency of one claimWork(tasks=1) followed by the
	// reportCompleted of the claimed run, by a single worker.
	Cycle Latency
}

// PrefillPerSecond is the rate the backlog was queued at.
func (r BacklogResult) PrefillPerSecond() float64 { return perSecond(r.Backlog, r.PrefillElapsed) }

// backlogDeadline keeps backlog tasks pending for the whole measurement,
// however slowly a large backlog is queued.
const backlogDeadline = 4 * time.Hour

// RunBacklog queues n tasks in a fresh task queue, then times
// opts.BacklogSamples sequential claimWork(1) + reportCompleted cycles of
// one worker. With opts.DrainBacklog it then works off the rest.
func RunBacklog(ctx context.Context, opts Options, n int) (BacklogResult, error) {
	if err := opts.defaults(); err != nil {
		return BacklogResult{}, err
	}
	if n < opts.BacklogSamples {
		return BacklogResult{}, fmt.Errorf("bench: a backlog of %d cannot supply %d samples", n, opts.BacklogSamples)
	}
	tq := opts.taskQueue(fmt.Sprintf("bl%d", n))
	res := BacklogResult{Backlog: n}
	opts.Logf("backlog %d: queueing on %s", n, tq)
	start := time.Now()
	if opts.Prefill != nil {
		res.PrefillMethod = opts.PrefillMethod
		if res.PrefillMethod == "" {
			res.PrefillMethod = "custom"
		}
		if err := opts.Prefill(ctx, tq, n); err != nil {
			return res, fmt.Errorf("pre-filling %d tasks: %w", n, err)
		}
	} else {
		res.PrefillMethod = fmt.Sprintf("createTask over HTTP, %d concurrent", opts.PrefillConcurrency)
		if err := prefillHTTP(ctx, &opts, tq, n); err != nil {
			return res, fmt.Errorf("pre-filling %d tasks: %w", n, err)
		}
	}
	res.PrefillElapsed = time.Since(start)
	opts.Logf("backlog %d: queued in %s (%.0f/s, %s)", n, res.PrefillElapsed.Round(time.Millisecond), res.PrefillPerSecond(), res.PrefillMethod)

	c := opts.client()
	req := &tcclient.ClaimWorkRequest{WorkerGroup: opts.WorkerGroup, WorkerID: "backlog", Tasks: 1}
	samples := make([]time.Duration, 0, opts.BacklogSamples)
	for i := range opts.BacklogSamples {
		t0 := time.Now()
		resp, err := c.ClaimWork(ctx, tq, req)
		if err != nil {
			return res, fmt.Errorf("backlog %d, sample %d: %w", n, i, err)
		}
		if len(resp.Tasks) != 1 {
			return res, fmt.Errorf("backlog %d, sample %d: claimWork returned %d tasks with the queue full", n, i, len(resp.Tasks))
		}
		claim := resp.Tasks[0]
		creds := claim.Credentials
		if _, err := c.WithCredentials(&creds).ReportCompleted(ctx, claim.Status.TaskID, claim.RunID); err != nil {
			return res, fmt.Errorf("backlog %d, sample %d: %w", n, i, err)
		}
		samples = append(samples, time.Since(t0))
	}
	res.Cycle = summarize(samples)
	opts.Logf("backlog %d: claim+complete p50 %s p99 %s", n, res.Cycle.P50, res.Cycle.P99)
	if opts.DrainBacklog {
		left := n - opts.BacklogSamples
		opts.Logf("backlog %d: draining the %d tasks left", n, left)
		if err := drain(ctx, &opts, tq, left); err != nil {
			return res, fmt.Errorf("draining backlog %d: %w", n, err)
		}
	}
	return res, nil
}

// prefillHTTP creates n tasks in tq with concurrent createTask calls.
func prefillHTTP(ctx context.Context, opts *Options, tq string, n int) error {
	c := opts.client()
	return repeatConcurrently(ctx, opts.PrefillConcurrency, n, func(ctx context.Context) error {
		_, err := c.CreateTask(ctx, tcclient.NewTaskID(), taskDefinition(tq, time.Now(), backlogDeadline))
		return err
	})
}

// drain claims and completes exactly n pending tasks of tq with
// opts.Workers workers. Counting down (rather than waiting for an empty
// reply) spares the last workers a full long-poll.
func drain(ctx context.Context, opts *Options, tq string, n int) error {
	c := opts.client()
	var (
		reserved atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// Reserve up to a batch of what is left before asking, so
				// no worker asks for tasks that another will take.
				batch := int64(opts.ClaimBatch)
				want := batch
				if over := reserved.Add(batch) - int64(n); over > 0 {
					want -= over
					reserved.Add(-min(over, batch))
				}
				if want <= 0 {
					return
				}
				resp, err := c.ClaimWork(ctx, tq, &tcclient.ClaimWorkRequest{WorkerGroup: opts.WorkerGroup, WorkerID: fmt.Sprintf("drain-%d", w), Tasks: int(want)})
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				for _, claim := range resp.Tasks {
					creds := claim.Credentials
					if _, err := c.WithCredentials(&creds).ReportCompleted(ctx, claim.Status.TaskID, claim.RunID); err != nil {
						errOnce.Do(func() { firstErr = err; cancel() })
						return
					}
				}
				// A short reply leaves work unreserved-but-unclaimed; give
				// it back.
				reserved.Add(int64(len(resp.Tasks)) - want)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// repeatConcurrently calls do n times in all, from at most concurrency
// goroutines at once, and stops at the first error, which it returns.
func repeatConcurrently(ctx context.Context, concurrency, n int, do func(context.Context) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(concurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				if err := do(ctx); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
