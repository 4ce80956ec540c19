package worker

// Interactive tasks (features.interactive) on the process engine: shells
// in the task's own sandbox, reached through hopper. The worker connects
// out to hopper for the run (the run's agent connection) and, for each
// shell hopper asks for, opens a WebSocket of its own joined to the
// viewer's; it never listens on a port.

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"github.com/hopper-ci/hopper/internal/interactive"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

// shells are the interactive shells of one run.
type shells struct {
	r *taskRun
	// start starts a shell on a terminal of the given size, in the
	// engine's place for the task's code.
	start  func(size interactive.Size) (shellProcess, error)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	attached int
	procs    map[shellProcess]struct{}
	// changed is signalled (without blocking) when attached changes.
	changed chan struct{}
}

// shellProcess is a running shell as an engine started it.
type shellProcess interface {
	// Read reads the terminal's output; it fails once the shell ended and
	// its output was read.
	Read(p []byte) (int, error)
	// Write types on the terminal.
	Write(p []byte) (int, error)
	Resize(size interactive.Size) error
	// Wait waits for the shell's end and returns its exit code.
	Wait() int
	// Kill ends the shell and what it started.
	Kill()
	// Close releases the terminal.
	Close() error
}

// startShells connects the run to hopper for its shells, which start
// starts: in the process engine's sandbox (sandboxShell) or the docker
// engine's container.
func (r *taskRun) startShells(start func(size interactive.Size) (shellProcess, error)) {
	ctx, cancel := context.WithCancel(r.ctx)
	s := &shells{r: r, start: start, ctx: ctx, cancel: cancel,
		procs: map[shellProcess]struct{}{}, changed: make(chan struct{}, 1)}
	r.shells = s
	r.log.Infof("Interactive task: open a shell in it with `hopper task shell %s` or from the console's task page", r.claim.TaskID)
	s.wg.Add(1)
	go s.agent()
}

// keepAliveOf is a payload's keep-alive (seconds; nil: the default).
func keepAliveOf(seconds *int) time.Duration {
	if seconds == nil {
		return interactive.DefaultKeepAlive
	}
	return time.Duration(*seconds) * time.Second
}

// keepAlive keeps an interactive task alive after its commands: for the
// payload's keep-alive, and while a shell is attached, unless the worker
// stops or the run ends (cancelled, its deadline passed).
func (r *taskRun) keepAlive(keep time.Duration) {
	s := r.shells
	if s == nil {
		return
	}
	ended := time.Now()
	r.log.Infof("Commands ended; the task stays alive for %s, and while a shell is attached", keep)
	for {
		if !interactive.StayAlive(ended, keep, s.count(), time.Now()) {
			return
		}
		timer := time.NewTimer(max(time.Until(ended.Add(keep)), time.Second))
		select {
		case <-timer.C:
		case <-s.changed:
		case <-r.claim.Lost():
			timer.Stop()
			return
		case <-r.w.abort:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// closeShells ends every shell and the agent connection; the task is
// over.
func (r *taskRun) closeShells() {
	s := r.shells
	if s == nil {
		return
	}
	s.cancel()
	s.mu.Lock()
	for p := range s.procs {
		p.Kill()
	}
	s.mu.Unlock()
	s.wg.Wait()
	r.shells = nil
}

func (s *shells) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attached
}

func (s *shells) attach(delta int) {
	s.mu.Lock()
	s.attached += delta
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// client signs with the claim's current credentials, which hold the
// run's queue:resolve-task scope.
func (s *shells) client() *tcclient.Client {
	creds := s.r.claim.Credentials()
	return s.r.w.queueClient().WithCredentials(&creds)
}

// agent keeps the run's connection to hopper, reconnecting after a
// failure, and opens the sessions hopper asks for.
func (s *shells) agent() {
	defer s.wg.Done()
	path := tcclient.RunPath(s.r.claim.TaskID, s.r.claim.RunID)
	delay := time.Second
	warned := false
	for s.ctx.Err() == nil {
		conn, err := s.client().DialInteractive(s.ctx, path+"/worker")
		if err != nil {
			if !warned && s.ctx.Err() == nil {
				s.r.logger.Warn("cannot connect to the server for the task's shells; trying again", "error", err)
				warned = true
			}
			select {
			case <-s.ctx.Done():
			case <-time.After(delay):
			}
			delay = min(2*delay, 15*time.Second)
			continue
		}
		delay, warned = time.Second, false
		conn.SetReadLimit(interactive.MaxMessage)
		for {
			typ, msg, err := conn.Read(s.ctx)
			if err != nil {
				break
			}
			if typ != websocket.MessageText {
				continue
			}
			c, err := interactive.ParseControl(msg)
			if err != nil || !sessionIDPattern(c.Session) {
				continue
			}
			s.wg.Add(1)
			go s.serve(path+"/sessions/"+c.Session, c.Size)
		}
		_ = conn.CloseNow()
	}
}

// sessionIDPattern checks a session id from hopper (a slugid).
func sessionIDPattern(id string) bool { return len(id) == 22 && slugLike(id) }

func slugLike(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// shellArgv is the shell a session runs: bash where the machine has it.
func shellArgv() []string {
	for _, sh := range []string{"/bin/bash", "/usr/bin/bash"} {
		if _, err := os.Stat(sh); err == nil {
			return []string{sh, "-i"}
		}
	}
	return []string{"/bin/sh", "-i"}
}

// serve runs one shell: a shell on a pseudo-terminal in the task's
// sandbox, its terminal joined to the session's WebSocket.
func (s *shells) serve(path string, size *interactive.Size) {
	defer s.wg.Done()
	conn, err := s.client().DialInteractive(s.ctx, path)
	if err != nil {
		s.r.logger.Warn("cannot open a shell's connection", "error", err)
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(interactive.MaxMessage)
	fail := func(err error) {
		_ = conn.Write(s.ctx, websocket.MessageText, interactive.Control{Error: err.Error()}.Encode())
		_ = conn.Close(websocket.StatusInternalError, "no shell")
	}
	if size == nil {
		size = &interactive.Size{Cols: 80, Rows: 24}
	}
	p, err := s.start(*size)
	if err != nil {
		fail(fmt.Errorf("starting the shell: %w", err))
		return
	}
	defer p.Close()
	s.mu.Lock()
	s.procs[p] = struct{}{}
	s.mu.Unlock()
	s.attach(1)
	s.r.logger.Info("interactive shell started", "taskId", s.r.claim.TaskID)
	defer func() {
		s.mu.Lock()
		delete(s.procs, p)
		s.mu.Unlock()
		s.attach(-1)
	}()

	// Not s.ctx: a cancelled read closes the connection, and the viewer
	// is told the shell's end after the task's end killed it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Keystrokes and resizes from the viewer.
	go func() {
		defer p.Kill()
		for {
			typ, msg, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := p.Write(msg); err != nil {
					return
				}
				continue
			}
			if c, err := interactive.ParseControl(msg); err == nil && c.Resize != nil {
				_ = p.Resize(*c.Resize)
			}
		}
	}()
	// The terminal's output to the viewer, one bounded message at a time.
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 32<<10)
		for {
			n, err := p.Read(buf)
			if n > 0 {
				if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					p.Kill()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	code := p.Wait()
	// The shell and all it started are gone; what they wrote last is
	// still to be read (reads end once it is drained).
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
		p.Close()
		<-copied
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	_ = conn.Write(wctx, websocket.MessageText, interactive.Control{Exit: &code}.Encode())
	_ = conn.Close(websocket.StatusNormalClosure, "the shell ended")
}

// sandboxShell is a shell on a pseudo-terminal in the process engine's
// task sandbox: the task's user, namespaces, cgroup and directory.
type sandboxShell struct {
	leader *os.File
	p      *sandbox.Process
}

// sandboxShellStarter starts the run's shells in its sandbox box, with
// the task's environment.
func (r *taskRun) sandboxShellStarter(box *sandbox.Task) func(interactive.Size) (shellProcess, error) {
	env := append(r.taskEnv(), "TERM=xterm-256color")
	return func(size interactive.Size) (shellProcess, error) {
		leader, follower, err := pty.Open()
		if err != nil {
			return nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
		}
		_ = pty.Setsize(leader, &pty.Winsize{Cols: uint16(size.Cols), Rows: uint16(size.Rows)})
		p, err := box.Start(sandbox.Command{Argv: shellArgv(), Dir: r.dir, Env: env, Output: io.Discard, TTY: follower})
		follower.Close()
		if err != nil {
			leader.Close()
			return nil, err
		}
		return &sandboxShell{leader: leader, p: p}, nil
	}
}

func (s *sandboxShell) Read(b []byte) (int, error)  { return s.leader.Read(b) }
func (s *sandboxShell) Write(b []byte) (int, error) { return s.leader.Write(b) }
func (s *sandboxShell) Resize(size interactive.Size) error {
	return pty.Setsize(s.leader, &pty.Winsize{Cols: uint16(size.Cols), Rows: uint16(size.Rows)})
}
func (s *sandboxShell) Wait() int    { return s.p.Wait().ExitCode }
func (s *sandboxShell) Kill()        { s.p.Kill() }
func (s *sandboxShell) Close() error { return s.leader.Close() }
