package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/buildinfo"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
	"github.com/hopper-ci/hopper/internal/worker/tasklog"
	"github.com/hopper-ci/hopper/internal/worker/tcproxy"
)

// Version is the worker implementation version printed in task logs: the
// build's version (internal/buildinfo), so a log names the code that ran it.
var Version = "hopper-worker/" + buildinfo.Read("").Short()

type logLine struct {
	warn bool
	text string
}

// runErr is one recorded error of a run; the first one decides the
// resolution (docs/contract/worker.md §1.6).
type runErr struct {
	failed  bool   // reportFailed rather than reportException
	reason  string // exception reason
	aborted bool   // the worker stopped the task code (maxRunTime, shutdown)
	msg     string
}

func malformed(format string, args ...any) runErr {
	return runErr{reason: tcclient.ReasonMalformedPayload, msg: fmt.Sprintf(format, args...)}
}

func internalError(format string, args ...any) runErr {
	return runErr{reason: tcclient.ReasonInternalError, msg: fmt.Sprintf(format, args...)}
}

func failure(format string, args ...any) runErr {
	return runErr{failed: true, msg: fmt.Sprintf(format, args...)}
}

// taskRun is the state of one run (docs/contract/worker.md §6.2).
type taskRun struct {
	w           *Worker
	claim       *Claim
	secondaries superseding.SecondarySet
	logger      *slog.Logger
	preLog      []logLine

	ctx     context.Context // cancelled when the claim is lost
	workCtx context.Context // additionally cancelled on immediate shutdown
	dir     string
	tmpDir  string
	log     *tasklog.Log
	pl      *payload.Payload
	logs    payload.Logs
	backing bool
	// logClosed is set once the footer is written and the log closed.
	logClosed bool
	live      liveEndpoint
	liveLog   bool // the live log was requested and is enabled
	proxy     *tcproxy.Proxy
	task      engineTask
	errs      []runErr
	caches    []*mountedCache
	purge     bool
	started   time.Time
	finished  bool

	// slot is the capacity slot (it picks the task user); box is the
	// task's sandbox while commands may run; usage is what it used.
	slot       int
	box        *sandbox.Task
	namespaces *sandbox.Namespaces
	usage      sandbox.Usage
	usageKnown bool
	// confined is set when the commands ran as a task user: artifacts
	// must then be the task's own files.
	confined bool
	// proxyPeerFunc, when set, limits who may use the task's proxy, and
	// proxyListen, when set, opens its listener (in the task's network
	// namespace).
	proxyPeerFunc func(local, remote net.Addr) bool
	proxyListen   func(address string) (net.Listener, error)
	watchStop     chan struct{}
	watchOnce     sync.Once
	// shells are the run's interactive shells (features.interactive).
	shells *shells
}

func (r *taskRun) record(e runErr) {
	r.errs = append(r.errs, e)
	if r.log != nil && e.msg != "" {
		r.log.Errorf("%s", e.msg)
	}
}

func (r *taskRun) lost() bool { return closed(r.claim.Lost()) }

func (r *taskRun) aborting() bool { return closed(r.w.abort) }

// execute drives the run through its states and returns the outcome. A
// panic inside the run is a worker bug: the run is resolved
// exception/internal-error and the worker keeps going.
func (r *taskRun) execute() (out Outcome) {
	defer r.claim.StopReclaiming()
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		r.logger.Error("panic while running task", "panic", p)
		if r.lost() || r.finished {
			out = Outcome{Lost: r.lost(), State: out.State, Reason: out.Reason}
			return
		}
		out = Outcome{State: tcclient.StateException, Reason: tcclient.ReasonInternalError}
		r.claim.StopReclaiming()
		r.resolve(out)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workCtx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	go func() {
		select {
		case <-r.claim.Lost():
			cancel()
		case <-r.w.abort:
			cancelWork()
		case <-ctx.Done():
		}
	}()
	r.ctx, r.workCtx, r.started = ctx, workCtx, time.Now()
	r.logger.Info("task claimed")
	r.watchStop = make(chan struct{})
	defer r.stopWatching()
	go r.watchCancellation(r.watchStop)

	if err := r.createDirs(); err != nil {
		// Setup failures before the run starts are reported at once, with
		// no log (docs/contract/worker.md §1.3 step 6).
		r.logger.Error("preparing task directory", "error", err)
		return r.conclude(Outcome{State: tcclient.StateException, Reason: tcclient.ReasonInternalError})
	}
	defer r.cleanup()
	log, err := tasklog.Create(filepath.Join(r.dir, "generic-worker", "live_backing.log"))
	if err != nil {
		r.logger.Error("creating task log", "error", err)
		return r.conclude(Outcome{State: tcclient.StateException, Reason: tcclient.ReasonInternalError})
	}
	r.log = log
	r.writeHeader()
	r.task = r.w.engine.prepare(r)
	if r.task != nil && len(r.errs) == 0 && !r.lost() {
		r.task.run()
	}
	if r.lost() {
		return r.cancelled()
	}
	r.uploadPhase()
	if r.lost() {
		return r.cancelled()
	}
	return r.conclude(r.outcome())
}

// conclude hands the outcome to the superseding step, resolves the run and
// returns the outcome.
func (r *taskRun) conclude(o Outcome) Outcome {
	// From here on a panic must not cause a second resolution.
	r.finished = true
	r.stopWatching()
	if r.secondaries != nil {
		r.secondaries.Finish(context.Background(), r.claim, o)
	}
	r.claim.StopReclaiming()
	r.resolve(o)
	return o
}

// cancelled handles a lost claim: no report, and no uploads but the log
// when the queue still takes it (docs/contract/worker.md §1.5).
func (r *taskRun) cancelled() Outcome {
	r.logger.Warn("claim lost; abandoning the run without a report", "reason", r.claim.LostReason())
	r.keepLogAfterLoss()
	o := Outcome{Lost: true, Aborted: true}
	if r.secondaries != nil {
		r.secondaries.Finish(context.Background(), r.claim, o)
	}
	return o
}

func (r *taskRun) outcome() Outcome {
	if len(r.errs) == 0 {
		return Outcome{State: tcclient.StateCompleted}
	}
	first := r.errs[0]
	if first.failed {
		return Outcome{State: tcclient.StateFailed, Aborted: first.aborted}
	}
	return Outcome{State: tcclient.StateException, Reason: first.reason, Aborted: first.aborted}
}

func (r *taskRun) resolve(o Outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q := r.claim.Queue()
	var err error
	switch o.State {
	case tcclient.StateCompleted:
		_, err = q.ReportCompleted(ctx, r.claim.TaskID, r.claim.RunID)
	case tcclient.StateFailed:
		_, err = q.ReportFailed(ctx, r.claim.TaskID, r.claim.RunID)
	default:
		_, err = q.ReportException(ctx, r.claim.TaskID, r.claim.RunID, o.Reason)
	}
	switch {
	case err == nil:
		r.logger.Info("task resolved", "state", o.State, "reason", o.Reason)
	case tcclient.StatusCode(err) == 409:
		r.logger.Warn("run was already resolved (cancelled or expired)", "error", err)
	default:
		r.logger.Error("resolving run failed; the claim will expire and the queue retries", "error", err)
	}
}

// createDirs makes the task directory <tasksDir>/task_<taskId prefix>_<runId>.
func (r *taskRun) createDirs() error {
	prefix := r.claim.TaskID
	if len(prefix) > 10 {
		prefix = prefix[:10]
	}
	base := fmt.Sprintf("task_%s_%d", prefix, r.claim.RunID)
	for i := 0; ; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s.%d", base, i)
		}
		dir := filepath.Join(r.w.cfg.TasksDir, name)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			r.dir = dir
			break
		}
		if !os.IsExist(err) || i > 100 {
			return fmt.Errorf("creating task directory: %w", err)
		}
	}
	if err := os.Mkdir(filepath.Join(r.dir, "generic-worker"), 0o755); err != nil {
		return fmt.Errorf("creating task log directory: %w", err)
	}
	tmp, err := os.MkdirTemp(r.w.cfg.WorkDir, "tmp-"+filepath.Base(r.dir)+"-")
	if err != nil {
		return fmt.Errorf("creating temporary directory: %w", err)
	}
	r.tmpDir = tmp
	return nil
}

func (r *taskRun) writeHeader() {
	cfg := &r.w.cfg
	meta := map[string]any{
		"implementation": Version,
		"go":             runtime.Version(),
		"os":             runtime.GOOS,
		"arch":           runtime.GOARCH,
		"engine":         r.w.engine.headerName(),
		"capacity":       cfg.Capacity,
		"workerGroup":    cfg.WorkerGroup,
		"workerId":       cfg.WorkerID,
		"taskQueueId":    cfg.TaskQueueID,
	}
	for k, v := range cfg.WorkerTypeMetadata {
		meta[k] = v
	}
	pretty, _ := json.MarshalIndent(meta, "", "  ")
	r.log.Infof("Worker Type (%s) settings:\n%s", cfg.TaskQueueID, pretty)
	r.log.Infof("Task ID: %s", r.claim.TaskID)
	r.log.Infof("Run ID: %d", r.claim.RunID)
	r.log.Infof("=== Task Starting ===")
	for _, l := range r.preLog {
		if l.warn {
			r.log.Warnf("%s", l.text)
		} else {
			r.log.Infof("%s", l.text)
		}
	}
}

func (r *taskRun) writeFooter() {
	r.log.Infof("=== Task Finished ===")
	r.log.Infof("Task Duration: %s", time.Since(r.started).Round(time.Millisecond))
	r.sandboxFooter()
	if len(r.errs) > 0 {
		first := r.errs[0]
		switch {
		case first.failed:
			r.log.Errorf("Task resolution: failed: %s", first.msg)
		default:
			r.log.Errorf("Task resolution: exception/%s: %s", first.reason, first.msg)
		}
		return
	}
	r.log.Infof("Task resolution: completed")
}

// uploadPhase uploads payload artifacts, closes and uploads the backing log
// and switches the live log to it (docs/contract/worker.md §6.2 row 18).
func (r *taskRun) uploadPhase() {
	// Uploads get the shutdown budget from the moment an immediate
	// shutdown is requested (docs/contract/worker.md §6.2 row 14b).
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	go func() {
		select {
		case <-r.w.abort:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(r.w.cfg.ShutdownUploadTimeout.Duration)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	}()
	if r.task != nil {
		r.uploadArtifacts(ctx, r.task.uploads())
	}
	r.checkLogWhole()
	r.writeFooter()
	r.log.Close()
	r.logClosed = true
	if r.live != nil {
		// Followers receive the rest of the log and end now that it is closed.
		_ = r.live.Close(5 * time.Second)
		r.live = nil
	}
	if r.lost() {
		return
	}
	if r.backing {
		if err := r.uploadBackingLog(ctx); err != nil {
			r.backingLogLost(err)
		} else if r.liveLog {
			lctx, lcancel := context.WithTimeout(ctx, time.Minute)
			_, err := r.claim.Queue().CreateArtifact(lctx, r.claim.TaskID, r.claim.RunID, r.logs.Live, &tcclient.CreateArtifactRequest{
				StorageType: tcclient.StorageLink, Expires: r.claim.Task.Expires, Artifact: r.logs.Backing,
			})
			lcancel()
			if err != nil {
				r.logger.Warn("switching the live log to the backing log", "error", err)
			}
		}
	}
	if ctx.Err() != nil && r.aborting() && !r.lost() {
		r.errs = append(r.errs, runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: "shutdown budget for uploads ran out"})
	}
}

// checkLogWhole turns a log that lost output (its disk filled up) into
// exception/resource-unavailable, as for any upload that could not
// complete: a run whose log is cut short must not pass for a complete
// record. The truncation outranks a failure of the task (whose cause the
// lost output may have held), not an exception already recorded.
func (r *taskRun) checkLogWhole() {
	lost, err := r.log.Truncated()
	if err == nil {
		return
	}
	e := runErr{reason: tcclient.ReasonResourceUnavailable,
		msg: fmt.Sprintf("The task log is incomplete: %v; %d bytes of output were lost.", err, lost)}
	r.log.Errorf("%s", e.msg)
	if len(r.errs) == 0 || r.errs[0].failed {
		r.errs = append([]runErr{e}, r.errs...)
		return
	}
	r.errs = append(r.errs, e)
}

// cleanup stops features, returns caches and removes the task directory.
func (r *taskRun) cleanup() {
	if r.task != nil {
		r.task.cleanup()
	}
	if r.live != nil {
		_ = r.live.Close(time.Second)
	}
	if r.proxy != nil {
		if err := r.proxy.Close(5 * time.Second); err != nil {
			r.logger.Warn("stopping proxy", "error", err)
		}
	}
	r.releaseCaches()
	if r.log != nil {
		_ = r.log.Release()
	}
	if r.tmpDir != "" {
		_ = os.RemoveAll(r.tmpDir)
	}
	if r.dir != "" && boolOr(r.w.cfg.CleanUpTaskDirs, true) {
		if err := os.RemoveAll(r.dir); err != nil {
			r.logger.Warn("removing task directory", "error", err)
		}
	} else if r.dir != "" && r.confined {
		if err := retireTaskDir(r.dir); err != nil {
			r.logger.Warn("taking the kept task directory back from the task user", "error", err)
		}
	}
}
