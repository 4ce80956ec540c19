package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Fleet is the idle-fleet benchmark: Options.Fleet workers long-poll an
// empty task queue while the life-cycle benchmark runs beside them.
const Fleet = "fleet"

// FleetResult is the outcome of the fleet benchmark.
type FleetResult struct {
	// Workers is the number of idle long-polling workers held.
	Workers int
	// Settle is how long the fleet had been connecting and waiting when
	// IdleRSS was read.
	Settle time.Duration
	// IdleRSS is the server's resident memory with the fleet waiting;
	// PeakRSS its peak over the whole benchmark (bytes, 0 when the server
	// is not a process of its own on this machine).
	IdleRSS, PeakRSS int64
	// IdleCPU is what the server spent while the fleet only waited, over
	// IdleWindow (negative when not measured).
	IdleCPU, IdleWindow time.Duration
	// Beside is the life-cycle benchmark while the fleet waits; Alone the
	// same after it has gone.
	Alone, Beside LifecycleResult
	// Woken counts the fleet's workers that got a task when Workers tasks
	// were created for them; Wake is the delay from each task's createTask
	// reply to the claimWork reply that carried it, and CreateElapsed the
	// time the creators took to create them.
	Woken         int
	Wake          Latency
	CreateElapsed time.Duration
}

// fleetWorker is one idle worker's outcome.
type fleetWorker struct {
	taskID string
	at     time.Time
}

// RunFleet holds opts.Fleet workers long-polling an empty task queue, reads
// the server's memory, runs the life-cycle benchmark beside them, creates
// one task per waiting worker and times how long each takes to reach one,
// and finally runs the life-cycle benchmark again without them to compare.
func RunFleet(ctx context.Context, opts Options) (FleetResult, error) {
	if err := opts.defaults(); err != nil {
		return FleetResult{}, err
	}
	res := FleetResult{Workers: opts.Fleet, IdleCPU: -1}
	serverPID := 0
	if opts.Processes != nil {
		if server, _ := opts.Processes(); len(server) == 1 {
			serverPID = server[0]
		}
	}
	tq := opts.taskQueue("fl")
	opts.Logf("fleet: %d workers long-polling %s", opts.Fleet, tq)
	f := startFleet(ctx, opts, tq)
	defer f.transport.CloseIdleConnections()
	defer f.cancel(nil)
	f.settle(&res, serverPID)
	opts.Logf("fleet: %d waiting after %s; server RSS %.0f MiB", opts.Fleet, res.Settle.Round(time.Millisecond), float64(res.IdleRSS)/(1<<20))
	if f.ctx.Err() != nil {
		return res, f.stop()
	}

	opts.Logf("fleet: the life-cycle benchmark beside the waiting fleet")
	beside, err := RunLifecycle(f.ctx, opts)
	if err != nil {
		_ = f.stop()
		return res, err
	}
	res.Beside = beside

	opts.Logf("fleet: one task for each of the %d waiting workers", opts.Fleet)
	createStart := time.Now()
	created := f.createTasks()
	res.CreateElapsed = time.Since(createStart)
	// Every worker should have its task within moments of the last
	// creation; a minute more is ample even on a loaded machine.
	select {
	case <-f.allGot:
	case <-f.ctx.Done():
	case <-time.After(time.Minute):
	}
	err = f.stop()
	var delays []time.Duration
	for _, w := range f.woken {
		if w.taskID == "" {
			continue
		}
		res.Woken++
		if at, ok := created[w.taskID]; ok {
			delays = append(delays, w.at.Sub(at))
		}
	}
	res.Wake = summarize(delays)
	if serverPID > 0 {
		_, res.PeakRSS, _ = processRSS(serverPID)
	}
	opts.Logf("fleet: %d of %d woken, p50 %s p99 %s", res.Woken, opts.Fleet, res.Wake.P50, res.Wake.P99)
	if err != nil {
		return res, err
	}
	// The fleet has gone: the same life-cycle alone, to compare. (It runs
	// last so that the fleet's memory is read on a fresh server.)
	opts.Logf("fleet: the life-cycle benchmark alone")
	res.Alone, err = RunLifecycle(ctx, opts)
	return res, err
}

// fleet is the idle workers of RunFleet: one goroutine each, ended by
// stop or by the first error (the cause of ctx).
type fleet struct {
	opts      Options
	tq        string
	transport *http.Transport
	client    *tcclient.Client
	ctx       context.Context
	cancel    context.CancelCauseFunc
	wg        sync.WaitGroup
	// sent counts the workers whose first claimWork is on the wire.
	sent    atomic.Int64
	woken   []fleetWorker
	gotTask atomic.Int64
	allGot  chan struct{}
	// opening bounds the connections being opened at once: ten thousand
	// at once overflow the server's accept backlog.
	opening chan struct{}
}

// startFleet starts opts.Fleet workers long-polling tq.
func startFleet(ctx context.Context, opts Options, tq string) *fleet {
	// Each idle worker holds a connection of its own, as separate machines
	// would.
	transport := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: opts.Fleet + 64, IdleConnTimeout: 5 * time.Minute,
		ReadBufferSize: 1024, WriteBufferSize: 1024}
	f := &fleet{opts: opts, tq: tq, transport: transport,
		client: &tcclient.Client{RootURL: opts.RootURL, Credentials: opts.Credentials, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: transport}},
		woken: make([]fleetWorker, opts.Fleet), allGot: make(chan struct{}), opening: make(chan struct{}, 256)}
	f.ctx, f.cancel = context.WithCancelCause(ctx)
	for i := range opts.Fleet {
		f.wg.Go(func() { f.work(i) })
	}
	return f
}

// work is worker i: it long-polls until it gets a task, reports it
// completed and ends.
func (f *fleet) work(i int) {
	req := &tcclient.ClaimWorkRequest{WorkerGroup: f.opts.WorkerGroup, WorkerID: fmt.Sprintf("fl-%d", i), Tasks: 1}
	first := true
	for f.ctx.Err() == nil {
		callCtx := f.ctx
		if first {
			select {
			case f.opening <- struct{}{}:
			case <-f.ctx.Done():
				return
			}
			var once sync.Once
			release := func() { once.Do(func() { <-f.opening; f.sent.Add(1) }) }
			defer release()
			callCtx = httptrace.WithClientTrace(f.ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { release() }})
			first = false
		}
		claims, err := claimWorkThin(callCtx, f.client, f.tq, req)
		if err != nil {
			if f.ctx.Err() == nil {
				f.cancel(err)
			}
			return
		}
		if len(claims) == 0 {
			continue // the long-poll ended: poll again
		}
		f.woken[i] = fleetWorker{taskID: claims[0].Status.TaskID, at: time.Now()}
		if err := reportCompletedThin(f.ctx, f.client, &claims[0]); err != nil && f.ctx.Err() == nil {
			f.cancel(err)
		}
		if f.gotTask.Add(1) == int64(f.opts.Fleet) {
			close(f.allGot)
		}
		return
	}
}

// stop ends the workers and returns the error that ended them early, if
// any.
func (f *fleet) stop() error {
	cause := context.Cause(f.ctx)
	f.cancel(errFinished)
	f.wg.Wait()
	if cause != nil && cause != errFinished {
		return fmt.Errorf("fleet: %w", cause)
	}
	return nil
}

// settle waits until every worker's first claimWork is sent, and a little
// more for the server to take the last ones in; then, when the server is
// a process here, it reads its CPU over the idle window and its memory.
func (f *fleet) settle(res *FleetResult, serverPID int) {
	start := time.Now()
	for f.sent.Load() < int64(f.opts.Fleet) && f.ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	// Let the server take in the last requests before measuring.
	time.Sleep(3 * time.Second)
	res.Settle = time.Since(start)
	if serverPID > 0 {
		// The fleet only waits for FleetIdle: the server's CPU over that
		// time, and its memory at the end (steady state: the garbage of
		// the fleet's arrival has had time to be collected and returned).
		before, _ := processCPU(serverPID)
		res.IdleWindow = f.opts.FleetIdle
		time.Sleep(res.IdleWindow)
		after, _ := processCPU(serverPID)
		res.IdleCPU = after - before
		res.IdleRSS, _, _ = processRSS(serverPID)
		res.Settle = time.Since(start)
	}
}

// createTasks makes one task per worker with opts.Creators creators and
// returns when each was created (its createTask reply).
func (f *fleet) createTasks() map[string]time.Time {
	created := make(map[string]time.Time, f.opts.Fleet)
	var createdMu sync.Mutex
	c := f.opts.client()
	var next atomic.Int64
	var creators sync.WaitGroup
	for range f.opts.Creators {
		creators.Go(func() {
			for f.ctx.Err() == nil && next.Add(1) <= int64(f.opts.Fleet) {
				id := tcclient.NewTaskID()
				if err := createTaskThin(f.ctx, c, id, taskDefinition(f.tq, time.Now(), time.Hour)); err != nil {
					if f.ctx.Err() == nil {
						f.cancel(err)
					}
					return
				}
				at := time.Now()
				createdMu.Lock()
				created[id] = at
				createdMu.Unlock()
			}
		})
	}
	creators.Wait()
	return created
}
