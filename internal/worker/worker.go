// Package worker is hopper's worker (docs/contract/worker.md §1–4, §6): it claims tasks
// from a Taskcluster queue over the public HTTP API, runs generic-worker
// style posix payloads as child processes, streams and uploads their logs
// and artifacts, keeps its claims alive and resolves each run. Signals are
// handled by the command that embeds it; it exposes Shutdown instead.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/livetunnel"
	"github.com/hopper-ci/hopper/internal/worker/payload"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
)

// Exit codes of Run (generic-worker compatible).
const (
	// ExitOK: stopped normally (idle timeout, task count reached).
	ExitOK = 0
	// ExitInternalErrors: too many consecutive internal errors.
	ExitInternalErrors = 69
	// ExitDrained: graceful shutdown after running tasks finished.
	ExitDrained = 71
	// ExitShutdown: immediate shutdown; running tasks were aborted.
	ExitShutdown = 72
)

// Worker claims and runs tasks. Create it with New, then call Run once.
type Worker struct {
	cfg       Config
	logger    *slog.Logger
	validator *payload.Validator
	caches    *cachePool
	engine    engine

	// supersede runs the superseding step for every claimed task whose
	// payload has a supersederUrl (if superseding is enabled).
	supersede supersedeStep

	// HTTPClient is used for all queue calls and downloads (nil: default).
	HTTPClient *http.Client

	// tunnel serves the runs' live logs through hopper (liveLogTunnel).
	tunnel *livetunnel.Client

	// reclaimRetryDelay is the first back-off of a failing reclaim.
	reclaimRetryDelay time.Duration
	// queueRetryDelay is the tcclient back-off base (tests shorten it).
	queueRetryDelay time.Duration

	credMu sync.RWMutex
	creds  tcclient.Credentials

	mu             sync.Mutex
	drain          chan struct{}
	abort          chan struct{}
	drainOnce      sync.Once
	abortOnce      sync.Once
	runs           sync.WaitGroup
	running        int
	slotsBusy      []bool
	runDone        chan struct{}
	internalErrors int
	tooManyErrors  bool
	claimed        int

	// heldRuns holds "taskId/runId" of every claim being held, so a run
	// answered twice (claimWork, then a superseding claimTask that the
	// queue answers as a repeat) is never run twice.
	heldRuns sync.Map

	// workDirLock holds the work dir for this worker (claimWorkDir).
	workDirLock *os.File
}

// New validates cfg and prepares the working directories.
func New(cfg Config, logger *slog.Logger) (*Worker, error) {
	cfg, err := cfg.Normalize()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{cfg.WorkDir, cfg.TasksDir, cfg.CachesDir, cfg.DownloadsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating worker directory: %w", err)
		}
	}
	v, err := payload.NewValidator()
	if err != nil {
		return nil, err
	}
	pool, err := newCachePool(cfg.CachesDir)
	if err != nil {
		return nil, err
	}
	eng, err := newEngine(&cfg, logger)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg: cfg, logger: logger.With("workerGroup", cfg.WorkerGroup, "workerId", cfg.WorkerID),
		validator: v, caches: pool, engine: eng, slotsBusy: make([]bool, cfg.Capacity),
		reclaimRetryDelay: time.Second, queueRetryDelay: 100 * time.Millisecond,
		creds: *cfg.workerCredentials(),
		drain: make(chan struct{}), abort: make(chan struct{}), runDone: make(chan struct{}, 1),
		supersede: superseding.New(superseding.Options{Logger: logger}).Run,
	}
	pool.purges, pool.log = w.purgeRequests, w.logger
	return w, nil
}

// Config returns the normalised configuration.
func (w *Worker) Config() Config { return w.cfg }

// SetCredentials replaces the worker's own credentials (e.g. when a
// provisioner rotates temporary credentials); later calls use them.
func (w *Worker) SetCredentials(c tcclient.Credentials) {
	w.credMu.Lock()
	defer w.credMu.Unlock()
	w.creds = c
}

// queueClient returns an unauthenticated-by-default base client.
func (w *Worker) queueClient() *tcclient.Client {
	return &tcclient.Client{RootURL: w.cfg.RootURL, HTTPClient: w.HTTPClient, RetryDelay: w.queueRetryDelay}
}

// Queue returns a client signing with the worker's current credentials.
func (w *Worker) Queue() *tcclient.Client {
	w.credMu.RLock()
	creds := w.creds
	w.credMu.RUnlock()
	return w.queueClient().WithCredentials(&creds)
}

// Shutdown asks the worker to stop. immediate=false drains: no new claims,
// running tasks finish, Run returns ExitDrained. immediate=true also aborts
// running tasks (killed, logs uploaded, resolved exception/worker-shutdown)
// and Run returns ExitShutdown. Safe to call repeatedly and concurrently.
func (w *Worker) Shutdown(immediate bool) {
	w.drainOnce.Do(func() { close(w.drain) })
	if immediate {
		w.abortOnce.Do(func() { close(w.abort) })
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Run claims and runs tasks until shutdown, the idle timeout, the task
// count, repeated internal errors, or ctx's end (treated as an immediate
// shutdown). It returns the process exit code to use.
func (w *Worker) Run(ctx context.Context) (int, error) {
	w.logger.Info("worker starting", "taskQueueId", w.cfg.TaskQueueID, "capacity", w.cfg.Capacity, "engine", w.cfg.Engine)
	if err := w.claimWorkDir(); err != nil {
		return 1, err
	}
	defer w.workDirLock.Close()
	if err := w.engine.recover(ctx); err != nil {
		return 1, fmt.Errorf("starting the %s engine: %w", w.cfg.Engine, err)
	}
	if c, ok := w.engine.(interface{ close() }); ok {
		// Engines that hold machine state (the process engine's cgroups)
		// release it when the worker stops.
		defer c.close()
	}
	if w.cfg.LiveLogTunnel {
		w.tunnel = w.startTunnel()
		defer w.tunnel.Close()
	}
	finished := make(chan struct{})
	defer close(finished)
	claimCtx, cancelClaims := context.WithCancel(context.Background())
	defer cancelClaims()
	go w.endClaimsOnShutdown(ctx, cancelClaims, finished)

	var (
		consecutiveErrors int
		lastStart         time.Time
		lastWork          = time.Now()
		firstCall         = true
		// lastGotTasks: the last claimWork answered with tasks, so the
		// queue may well have more; the next call, once there is free
		// capacity, starts at once and its long poll does any waiting.
		lastGotTasks bool
	)
	for {
		if closed(w.drain) || w.limitReached() {
			break
		}
		free := w.freeCapacity()
		if free == 0 {
			select {
			case <-w.runDone:
			case <-w.drain:
			}
			lastWork = time.Now()
			continue
		}
		if w.cfg.IdleTimeout.Duration > 0 && w.idle() && time.Since(lastWork) >= w.cfg.IdleTimeout.Duration {
			w.logger.Info("idle timeout reached")
			break
		}
		if !lastGotTasks && !w.waitClaimGap(lastStart, consecutiveErrors) {
			continue // draining
		}
		if n := w.cfg.NumberOfTasksToRun; n > 0 {
			free = min(free, n-w.claimedCount())
		}
		lastStart = time.Now()
		resp, err := w.Queue().ClaimWork(claimCtx, w.cfg.TaskQueueID, &tcclient.ClaimWorkRequest{
			WorkerGroup: w.cfg.WorkerGroup, WorkerID: w.cfg.WorkerID, Tasks: min(free, 32),
		})
		if err != nil {
			if closed(w.drain) {
				break
			}
			code := tcclient.StatusCode(err)
			if code == http.StatusConflict {
				// The queue refuses a worker its pool's manager removed:
				// the runs it held were resolved with the removal, so
				// nothing is lost by stopping; waiting for the Worker
				// Manager to say so takes until their claims run out.
				w.logger.Warn("removed from the worker pool: the queue refuses this worker work; stopping", "error", err)
				w.Shutdown(false)
				break
			}
			if firstCall && (code == http.StatusUnauthorized || code == http.StatusForbidden) {
				w.Shutdown(false)
				w.runs.Wait()
				return 1, fmt.Errorf("the queue rejected the worker's credentials: %w", err)
			}
			consecutiveErrors++
			lastGotTasks = false
			w.logger.Error("claimWork failed", "error", err, "consecutiveErrors", consecutiveErrors)
			continue
		}
		firstCall = false
		consecutiveErrors = 0
		lastGotTasks = len(resp.Tasks) > 0
		for _, tc := range resp.Tasks {
			lastWork = time.Now()
			w.startRun(tc)
		}
	}
	w.logger.Info("worker stopping; waiting for running tasks")
	w.runs.Wait()
	switch {
	case closed(w.abort):
		return ExitShutdown, nil
	case w.tooManyInternalErrors():
		return ExitInternalErrors, fmt.Errorf("%d consecutive runs ended in internal-error", w.cfg.MaxInternalErrors)
	case closed(w.drain):
		return ExitDrained, nil
	}
	return ExitOK, nil
}

// endClaimsOnShutdown cancels the claimWork calls (cancelClaims) at the
// first shutdown, and turns ctx's end into an immediate one, until Run
// has finished.
func (w *Worker) endClaimsOnShutdown(ctx context.Context, cancelClaims context.CancelFunc, finished <-chan struct{}) {
	select {
	case <-ctx.Done():
		w.Shutdown(true)
	case <-w.drain:
	case <-finished:
		return
	}
	// Any shutdown, a drain included, ends a claimWork long-poll at once:
	// an idle worker would otherwise wait up to 20 s for the queue's empty
	// answer before it could stop. (A task the queue claims for this call
	// in the instant it is abandoned is retried once its claim expires, as
	// after a worker crash.)
	cancelClaims()
	select {
	case <-ctx.Done():
		w.Shutdown(true)
	case <-finished:
	}
}

// waitClaimGap keeps the configured gap between the start of a claimWork
// call that brought no task (the last at lastStart) and the next, longer
// after consecutive errors: it spares a queue that answers an empty poll
// at once, or keeps failing, a hot loop. It
// returns false if a drain began meanwhile.
func (w *Worker) waitClaimGap(lastStart time.Time, consecutiveErrors int) bool {
	gap := w.cfg.ClaimInterval.Duration
	if consecutiveErrors > 0 {
		gap = min(w.cfg.ClaimInterval.Duration<<min(consecutiveErrors-1, 16), w.cfg.MaxClaimBackoff.Duration)
		gap = max(gap, w.cfg.ClaimInterval.Duration)
	}
	wait := time.Until(lastStart.Add(gap))
	if lastStart.IsZero() || wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.drain:
		return false
	}
}

func (w *Worker) freeCapacity() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cfg.Capacity - w.running
}

func (w *Worker) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running == 0
}

func (w *Worker) claimedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claimed
}

func (w *Worker) limitReached() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tooManyErrors || w.cfg.NumberOfTasksToRun > 0 && w.claimed >= w.cfg.NumberOfTasksToRun
}

func (w *Worker) tooManyInternalErrors() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tooManyErrors
}

func (w *Worker) startRun(tc tcclient.TaskClaim) {
	w.mu.Lock()
	w.running++
	w.claimed++
	slot := slices.Index(w.slotsBusy, false)
	w.slotsBusy[slot] = true
	w.mu.Unlock()
	w.runs.Add(1)
	go func() {
		defer w.runs.Done()
		outcome := w.runClaim(tc, slot)
		w.mu.Lock()
		w.slotsBusy[slot] = false
		w.running--
		if outcome.State == tcclient.StateException && outcome.Reason == tcclient.ReasonInternalError {
			w.internalErrors++
			if w.internalErrors >= w.cfg.MaxInternalErrors {
				w.tooManyErrors = true
			}
		} else if !outcome.Lost {
			w.internalErrors = 0
		}
		w.mu.Unlock()
		select {
		case w.runDone <- struct{}{}:
		default:
		}
	}()
}

// runClaim handles one claim from start to finish and returns the outcome
// of the task that ran (the primary).
func (w *Worker) runClaim(tc tcclient.TaskClaim, slot int) Outcome {
	logger := w.logger.With("taskId", tc.Status.TaskID, "runId", tc.RunID)
	claim, err := w.HoldClaim(tc)
	if err != nil {
		logger.Error("invalid claim", "error", err)
		if tc.Status.TaskID != "" && tc.Credentials.ClientID != "" {
			creds := tc.Credentials
			_, rerr := w.queueClient().WithCredentials(&creds).ReportException(context.Background(),
				tc.Status.TaskID, tc.RunID, tcclient.ReasonInternalError)
			if rerr != nil {
				logger.Error("reporting invalid claim", "error", rerr)
			}
		}
		return Outcome{State: tcclient.StateException, Reason: tcclient.ReasonInternalError}
	}
	r := &taskRun{w: w, claim: claim, logger: logger, slot: slot}
	if url := superseding.PayloadURL(claim.Task.Payload); url != "" && w.cfg.SupersedingEnabled() {
		// An immediate shutdown during the superseding step cancels it, so
		// held claims are released at once (docs/contract/worker.md §6.2 row 14c).
		superCtx, cancelSuper := context.WithCancel(context.Background())
		go func() {
			select {
			case <-w.abort:
				cancelSuper()
			case <-superCtx.Done():
			}
		}()
		res, err := w.supersede(superCtx, w.SupersedingRequest(claim, url))
		cancelSuper()
		if err != nil {
			r.preLog = append(r.preLog, logLine{warn: true, text: fmt.Sprintf("superseding skipped: %v", err)})
		} else {
			// The step's claims are the worker's own (supersedingHost).
			if primary, ok := res.Primary.(*Claim); ok && primary != claim {
				r.claim = primary
				r.logger = w.logger.With("taskId", primary.TaskID, "runId", primary.RunID)
			}
			r.secondaries = res.Secondaries
			for _, l := range res.LogLines {
				r.preLog = append(r.preLog, logLine{text: l})
			}
			for _, l := range res.Warnings {
				r.preLog = append(r.preLog, logLine{warn: true, text: l})
			}
		}
	}
	return r.execute()
}
