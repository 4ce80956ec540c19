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
	c := opts.client()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next, completed atomic.Int64
		claimCalls      atomic.Int64
		allDone         = make(chan struct{})
		doneOnce        sync.Once
		wg, creators    sync.WaitGroup
		createsDone     time.Time
		createsMu       sync.Mutex
	)
	fail := func(err error) { cancel(err) }

	ticks, ticksOK := readCPUTicks()
	cpu := markCPU(opts.Processes)
	start := time.Now()
	for w := range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &tcclient.ClaimWorkRequest{WorkerGroup: opts.WorkerGroup, WorkerID: fmt.Sprintf("lc-%d", w), Tasks: opts.ClaimBatch}
			for ctx.Err() == nil {
				claims, err := claimWorkThin(ctx, c, tq, req)
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				if len(claims) > 0 {
					claimCalls.Add(1)
				}
				// The worker runs the tasks it claimed side by side, as one
				// with that capacity does, and reports each as it ends.
				var reports sync.WaitGroup
				for i := range claims {
					reports.Go(func() {
						if err := reportCompletedThin(ctx, c, &claims[i]); err != nil {
							if ctx.Err() == nil {
								fail(err)
							}
							return
						}
						if completed.Add(1) == int64(opts.Tasks) {
							doneOnce.Do(func() { close(allDone) })
						}
					})
				}
				reports.Wait()
			}
		}()
	}
	for range opts.Creators {
		creators.Add(1)
		go func() {
			defer creators.Done()
			for ctx.Err() == nil {
				if next.Add(1) > int64(opts.Tasks) {
					break
				}
				id := tcclient.NewTaskID()
				if err := createTaskThin(ctx, c, id, taskDefinition(tq, time.Now(), time.Hour)); err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
			}
			createsMu.Lock()
			if now := time.Now(); now.After(createsDone) {
				createsDone = now
			}
			createsMu.Unlock()
		}()
	}
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	creators.Wait()
	res.Elapsed = time.Since(start)
	res.Machine = machineSince(ticks, ticksOK)
	res.CPU = cpu.since(opts.Processes)
	// Workers still long-polling an empty queue are released by the
	// cancellation.
	cause := context.Cause(ctx)
	cancel(errFinished)
	wg.Wait()
	if cause != nil && !errors.Is(cause, errFinished) {
		return res, fmt.Errorf("life-cycle benchmark: %w", cause)
	}
	res.CreateElapsed = createsDone.Sub(start)
	res.ClaimCalls = claimCalls.Load()
	opts.Logf("life-cycle: %d tasks in %s: %.0f tasks/s", res.Tasks, res.Elapsed.Round(time.Millisecond), res.TasksPerSecond())
	return res, nil
}

// errFinished ends a benchmark's helpers once its work is done.
var errFinished = errors.New("benchmark finished")
