package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// LifecycleResult is the outcome of the life-cycle benchmark.
type LifecycleResult struct {
	Tasks, Creators, Workers, ClaimBatch int
	// Elapsed runs from the first createTask until every task was reported
	// completed and every createTask had its reply: a task can be claimed
	// and completed before the reply to its own create reaches the creator.
	Elapsed time.Duration
	// CreateElapsed runs from the first createTask to the last createTask
	// reply.
	CreateElapsed time.Duration
	// ClaimCalls counts the claimWork calls that returned at least one task
	// (Tasks / ClaimCalls is the mean batch the workers got).
	ClaimCalls int64
	// Machine is the whole machine's CPU over the run (server, client and
	// database alike when they share it).
	Machine MachineCPU
	// CPU is what each role's processes spent over the run
	// (Options.Processes).
	CPU RoleCPU
}

// TasksPerSecond is the full life-cycle throughput.
func (r LifecycleResult) TasksPerSecond() float64 { return perSecond(r.Tasks, r.Elapsed) }

// CreatesPerSecond is the createTask rate while workers were also busy.
func (r LifecycleResult) CreatesPerSecond() float64 { return perSecond(r.Tasks, r.CreateElapsed) }

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// RunLifecycle creates opts.Tasks tasks with opts.Creators concurrent
// creators while opts.Workers concurrent workers claim them (claimWork with
// up to opts.ClaimBatch tasks) and report each completed with the claim's
// own temporary credentials, and times the whole.
func RunLifecycle(ctx context.Context, opts Options) (LifecycleResult, error) {
	if err := opts.defaults(); err != nil {
		return LifecycleResult{}, err
	}
	res := LifecycleResult{Tasks: opts.Tasks, Creators: opts.Creators, Workers: opts.Workers, ClaimBatch: opts.ClaimBatch}
	tq := opts.taskQueue("lc")
	opts.Logf("life-cycle: %d tasks, %d creators, %d workers (batch %d) on %s", opts.Tasks, opts.Creators, opts.Workers, opts.ClaimBatch, tq)
	l := &lifecycle{opts: opts, tq: tq, client: opts.client(), allDone: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	defer l.cancel(nil)
	var workers, creators sync.WaitGroup

	ticks, ticksOK := readCPUTicks()
	cpu := markCPU(opts.Processes)
	start := time.Now()
	for w := range opts.Workers {
		workers.Go(func() { l.work(w) })
	}
	for range opts.Creators {
		creators.Go(l.create)
	}
	select {
	case <-l.allDone:
	case <-l.ctx.Done():
	}
	creators.Wait()
	res.Elapsed = time.Since(start)
	res.Machine = machineSince(ticks, ticksOK)
	res.CPU = cpu.since(opts.Processes)
	// Workers still long-polling an empty queue are released by the
	// cancellation.
	cause := context.Cause(l.ctx)
	l.cancel(errFinished)
	workers.Wait()
	if cause != nil && !errors.Is(cause, errFinished) {
		return res, fmt.Errorf("life-cycle benchmark: %w", cause)
	}
	res.CreateElapsed = l.createsDone.Sub(start)
	res.ClaimCalls = l.claimCalls.Load()
	opts.Logf("life-cycle: %d tasks in %s: %.0f tasks/s", res.Tasks, res.Elapsed.Round(time.Millisecond), res.TasksPerSecond())
	return res, nil
}

// lifecycle is one run of RunLifecycle: its creators and workers, ended by
// the first error (the cause of ctx) or once every task is done.
type lifecycle struct {
	opts   Options
	tq     string
	client *tcclient.Client
	ctx    context.Context
	cancel context.CancelCauseFunc
	// next numbers the tasks to create; completed counts those reported.
	next, completed atomic.Int64
	// claimCalls counts the claimWork calls that returned a task.
	claimCalls atomic.Int64
	allDone    chan struct{}
	doneOnce   sync.Once
	// createsDone is when the last creator finished.
	createsMu   sync.Mutex
	createsDone time.Time
}

// work is worker w: it claims up to ClaimBatch tasks at a time and reports
// them completed, until the run ends.
func (l *lifecycle) work(w int) {
	req := &tcclient.ClaimWorkRequest{WorkerGroup: l.opts.WorkerGroup, WorkerID: fmt.Sprintf("lc-%d", w), Tasks: l.opts.ClaimBatch}
	for l.ctx.Err() == nil {
		claims, err := claimWorkThin(l.ctx, l.client, l.tq, req)
		if err != nil {
			if l.ctx.Err() == nil {
				l.cancel(err)
			}
			return
		}
		if len(claims) > 0 {
			l.claimCalls.Add(1)
		}
		// The worker runs the tasks it claimed side by side, as one with
		// that capacity does, and reports each as it ends.
		var reports sync.WaitGroup
		for i := range claims {
			reports.Go(func() {
				if err := reportCompletedThin(l.ctx, l.client, &claims[i]); err != nil {
					if l.ctx.Err() == nil {
						l.cancel(err)
					}
					return
				}
				if l.completed.Add(1) == int64(l.opts.Tasks) {
					l.doneOnce.Do(func() { close(l.allDone) })
				}
			})
		}
		reports.Wait()
	}
}

// create is one creator: it creates tasks until all are made.
func (l *lifecycle) create() {
	for l.ctx.Err() == nil {
		if l.next.Add(1) > int64(l.opts.Tasks) {
			break
		}
		id := tcclient.NewTaskID()
		if err := createTaskThin(l.ctx, l.client, id, taskDefinition(l.tq, time.Now(), time.Hour)); err != nil {
			if l.ctx.Err() == nil {
				l.cancel(err)
			}
			return
		}
	}
	l.createsMu.Lock()
	if now := time.Now(); now.After(l.createsDone) {
		l.createsDone = now
	}
	l.createsMu.Unlock()
}

// errFinished ends a benchmark's helpers once its work is done.
var errFinished = errors.New("benchmark finished")
