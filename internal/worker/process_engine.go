package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

// processEngine runs generic-worker posix payloads as child processes of
// the worker, each command in the task's sandbox (package sandbox): with
// isolation none it is generic-worker's "insecure" engine, with task users
// its "multiuser" one.
type processEngine struct {
	cfg    *Config
	logger *slog.Logger
	// sandbox is set up by recover, before the first claim.
	sandbox *sandbox.Manager
}

// headerName names the engine in the log's header, beside its "Sandbox:"
// line; generic-worker's names ("insecure", "multiuser") would call a
// sandboxed engine insecure.
func (e *processEngine) headerName() string {
	if e.sandbox == nil || e.sandbox.Isolation() == sandbox.None {
		return "process (isolation none)"
	}
	return "process (sandboxed)"
}

// recover sets the sandbox up: it empties the cgroups a crashed
// predecessor left (its processes died with their namespaces' inits), and
// in strict mode a machine that lacks a protection stops the worker before
// it claims anything.
func (e *processEngine) recover(context.Context) error {
	box, err := newSandbox(*e.cfg, e.logger)
	if err != nil {
		return err
	}
	e.sandbox = box
	return nil
}

// close removes the worker's cgroups when it stops.
func (e *processEngine) close() {
	if e.sandbox != nil {
		e.sandbox.Close()
	}
}

func (e *processEngine) prepare(r *taskRun) engineTask {
	r.log.Infof("Sandbox: %s", e.sandbox.Summary())
	ns, err := e.sandbox.NewNamespaces()
	if err != nil {
		r.record(internalError("Could not make the task's namespaces: %v", err))
		return nil
	}
	r.namespaces = ns
	if ns.OwnNetwork() {
		// The proxy listens on the task's own loopback, which only the
		// task's processes share: no one else can reach it.
		r.proxyListen = ns.Listen
	} else if u := e.sandbox.User(r.slot); u != nil {
		// The proxy listens on loopback, where every task could reach
		// it: it serves the slot's user only.
		r.proxyPeerFunc = func(local, remote net.Addr) bool {
			uid, err := sandbox.PeerUID(local, remote)
			return err == nil && uid == u.UID
		}
	}
	r.prepare()
	if r.pl == nil {
		r.namespaces.Close()
		return nil
	}
	return processTask{r: r, sandbox: e.sandbox}
}

type processTask struct {
	r       *taskRun
	sandbox *sandbox.Manager
}

func (t processTask) run() {
	t.r.openSandbox(t.sandbox)
	if len(t.r.errs) == 0 && !t.r.lost() {
		if t.r.pl.Features.Interactive {
			t.r.startShells(t.r.sandboxShellStarter(t.r.box))
		}
		t.r.runCommands()
		t.r.keepAlive(keepAliveOf(t.r.pl.Interactive.KeepAlive))
	}
	t.r.closeShells()
	t.r.closeSandbox()
}

func (t processTask) uploads() []artifactUpload {
	ups := ExpandArtifacts(t.r.dir, t.r.pl.Artifacts, t.r.claim.Task.Expires.Time)
	if t.r.confined {
		confineUploads(t.r.dir, ups)
	}
	return ups
}

// confineUploads turns every file upload whose real path lies outside the
// task directory into an error artifact. A task that ran as a task user
// could otherwise have the worker, which uploads as root, publish what the
// task itself may not read: a symlink to the worker's config, an absolute
// path, "../". Nothing of the task runs any more when this is checked (its
// processes died with the sandbox), so the paths cannot change before the
// upload opens them.
func confineUploads(dir string, ups []artifactUpload) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		root = dir
	}
	for i := range ups {
		u := &ups[i]
		if u.file == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(u.file)
		if err == nil {
			if rel, rerr := filepath.Rel(root, real); rerr == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				continue
			}
		}
		msg := fmt.Sprintf("Artifact %s: %s resolves outside the task directory; a sandboxed task may only publish its own files", u.name, u.file)
		*u = errorUpload(u.name, u.expires, tcclient.ArtifactInvalidResource, msg)
	}
}

// cleanup kills what a panicking run may have left in the sandbox; the
// caches are taskRun.cleanup's, which predates engines.
func (t processTask) cleanup() {
	t.r.closeShells()
	t.r.closeSandbox()
}

// commandResult is how one command ended.
type commandResult struct {
	// started is false when the process could not be started at all.
	started  bool
	startErr error
	// exitCode is the process exit status, or -1 when killed by a signal.
	exitCode int
	// aborted is set when the worker killed the command, with why.
	aborted     bool
	abortReason string
	wall        time.Duration
	user, sys   time.Duration
}

// stopSignal tells a running command why it must die.
type stopSignal struct {
	reason string
}

// runProcess runs argv in dir with env, output to out, in the task's
// sandbox. It returns when the command exits or, if a value arrives on
// stop, after killing it and everything it started. Whatever the command
// left running is killed when it ends (the sandbox's namespace, or its
// process group with isolation none), so nothing a command started
// outlives it.
func runProcess(box *sandbox.Task, argv []string, dir string, env []string, out io.Writer, stop <-chan stopSignal) commandResult {
	start := time.Now()
	p, err := box.Start(sandbox.Command{Argv: argv, Dir: dir, Env: env, Output: out})
	if err != nil {
		return commandResult{startErr: err}
	}
	var res commandResult
	select {
	case <-p.Done():
	case sig := <-stop:
		res.aborted, res.abortReason = true, sig.reason
		p.Kill()
	}
	r := p.Wait()
	if !r.Started {
		return commandResult{startErr: r.StartErr}
	}
	res.started = true
	res.exitCode, res.user, res.sys = r.ExitCode, r.User, r.System
	res.wall = time.Since(start)
	return res
}

// shellQuote renders argv so that a user can paste it into a shell.
func shellQuote(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

func (r commandResult) verdict() string {
	switch {
	case !r.started:
		return "FAILED (could not start)"
	case r.aborted:
		return "ABORTED (" + r.abortReason + ")"
	case r.exitCode == 0:
		return "SUCCEEDED"
	}
	return "FAILED"
}

func (r commandResult) summary() string {
	return fmt.Sprintf("Exit Code: %d\nUser Time: %s\nKernel Time: %s\nWall Time: %s\nResult: %s",
		r.exitCode, r.user.Round(time.Millisecond), r.sys.Round(time.Millisecond), r.wall.Round(time.Millisecond), r.verdict())
}

// runCommands executes payload.command in order (docs/contract/worker.md §6.2 rows 9–14).
func (r *taskRun) runCommands() {
	env := r.taskEnv()
	maxRun := time.Duration(r.pl.MaxRunTime) * time.Second
	deadlineAt := time.Now().Add(maxRun)
	lastExit := -1
	for i, argv := range r.pl.Command {
		if r.aborting() {
			r.record(runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: "Worker is shutting down; remaining commands not run."})
			break
		}
		r.log.Infof("Executing command %d: %s", i, shellQuote(argv))
		stop := make(chan stopSignal, 1)
		watchDone := make(chan struct{})
		deadline := time.NewTimer(time.Until(deadlineAt))
		go func() {
			defer deadline.Stop()
			select {
			case <-deadline.C:
				stop <- stopSignal{reason: "maxRunTime exceeded"}
			case <-r.w.abort:
				stop <- stopSignal{reason: "worker shutdown"}
			case <-r.claim.Lost():
				stop <- stopSignal{reason: "claim lost"}
			case <-watchDone:
			}
		}()
		res := runProcess(r.box, argv, r.dir, env, r.log, stop)
		close(watchDone)
		if !res.started {
			r.log.Errorf("Could not start command %d: %v", i, res.startErr)
			r.record(failure("Command %d could not be started: %v", i, res.startErr))
			break
		}
		r.log.Infof("%s", res.summary())
		lastExit = res.exitCode
		if res.aborted {
			switch res.abortReason {
			case "maxRunTime exceeded":
				r.purge = true
				r.record(runErr{failed: true, aborted: true, msg: fmt.Sprintf("Aborting task: max run time exceeded (maxRunTime %d seconds); process group killed.", r.pl.MaxRunTime)})
			case "worker shutdown":
				r.purge = true
				r.record(runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: "Worker is shutting down; task aborted."})
			default:
				r.purge = true
			}
			break
		}
		if res.exitCode != 0 {
			if slices.Contains(r.pl.OnExitStatus.Retry, res.exitCode) {
				r.record(runErr{reason: tcclient.ReasonIntermittentTask,
					msg: fmt.Sprintf("Command %d exited with code %d, listed in onExitStatus.retry: resolving as intermittent-task.", i, res.exitCode)})
			} else {
				r.record(failure("Command %d exited with code %d.", i, res.exitCode))
			}
			break
		}
	}
	if lastExit >= 0 && slices.Contains(r.pl.OnExitStatus.PurgeCaches, lastExit) {
		r.log.Infof("Exit code %d is listed in onExitStatus.purgeCaches: caches of this run will be purged.", lastExit)
		r.purge = true
	}
}
