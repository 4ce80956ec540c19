package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setup detects namespaces, cgroups and task users.
func (m *Manager) setup() {
	if err := m.probeNamespaces(); err != nil {
		m.missing = append(m.missing, "PID and mount namespaces: "+err.Error())
	} else {
		m.namespaces = true
		m.probeTaskNamespaces()
	}
	cg, missing := setupCgroups(m.cfg.Name)
	m.cg = cg
	m.missing = append(m.missing, missing...)
	if cg == nil {
		m.missing = append(m.missing, "resource limits and usage (no cgroups)")
	}
	if os.Geteuid() == 0 {
		// The OOM killer picks task processes (+500, set by the init)
		// before the worker that would report their end.
		_ = os.WriteFile("/proc/self/oom_score_adj", []byte("-500"), 0)
	}
	users, err := prepareUsers(m.cfg)
	if err != nil {
		m.missing = append(m.missing, "task users: "+err.Error())
	} else {
		m.users = users
	}
}

// Close removes this worker's cgroup directories.
func (m *Manager) Close() {
	m.closeSpares()
	if m.cg == nil {
		return
	}
	for _, base := range m.cg.bases() {
		removeCgroup(base)
	}
}

// probeTaskNamespaces checks that tasks can have IPC and network
// namespaces of their own, with slirp4netns for an outbound network, and
// that commands can run with no-new-privileges and the seccomp filter: it
// starts an init that joins a task's namespaces and restricts itself.
func (m *Manager) probeTaskNamespaces() {
	if m.cfg.Network == NetworkOutbound {
		path, err := exec.LookPath("slirp4netns")
		if err != nil {
			// Auto mode goes on with tasks in the worker's network.
			m.missing = append(m.missing, "own network namespace per task (outbound network needs slirp4netns, which is not installed): tasks share the worker's network, its loopback included")
			m.sharedNet = true
		}
		m.slirp = path
		if !m.sharedNet {
			resolv, err := prepareResolvConf(m.cfg.HomesDir)
			if err != nil {
				m.missing = append(m.missing, "resolver configuration for tasks: "+err.Error())
				return
			}
			m.resolvConf = resolv
		}
	}
	m.taskNamespaces = true
	ns, err := m.NewNamespaces()
	if err == nil {
		err = m.probe(initSpec{Probe: true, MountProc: true, Namespaces: true, Restrict: true}, ns)
		ns.Close()
	}
	if err != nil {
		m.taskNamespaces, m.sharedNet = false, false
		m.missing = append(m.missing, "own IPC and network namespaces per task, no-new-privileges and refusing user namespaces: "+err.Error())
		return
	}
	m.restrict = true
}

// probe starts an init with spec and waits for its report.
func (m *Manager) probe(spec initSpec, ns *Namespaces) error {
	p, err := m.spawnInit()
	if err != nil {
		return err
	}
	if err := p.launch(spec, io.Discard, nil, ns, nil); err != nil {
		return err
	}
	res := p.Wait()
	if !res.Started {
		return res.StartErr
	}
	return nil
}

// probeNamespaces starts the init once with nothing to run, which proves
// that PID and mount namespaces and a fresh /proc work here.
func (m *Manager) probeNamespaces() error {
	if len(m.cfg.InitCommand) == 0 {
		return errors.New("this program provides no sandbox init")
	}
	return m.probe(initSpec{Probe: true, MountProc: true}, nil)
}

// Task is one task's sandbox: its cgroup, its user and its limits. Run its
// commands with Start, one at a time, and Close it at the end of the task.
type Task struct {
	m      *Manager
	slot   int
	user   *User
	cg     *taskCgroup
	ns     *Namespaces
	Limits Limits
}

// NewTask prepares the sandbox of a task running in slot (0-based): it
// creates the task's cgroup with the limits and empties the slot user's
// home; its commands join ns (from NewNamespaces; nil: the worker's). In
// none mode it only remembers the slot. Close does not close ns.
func (m *Manager) NewTask(slot int, lim Limits, ns *Namespaces) (*Task, error) {
	t := &Task{m: m, Limits: lim, slot: slot, ns: ns}
	if m.cfg.Isolation == None {
		return t, nil
	}
	t.user = m.User(slot)
	if t.user != nil {
		if err := resetHome(t.user); err != nil {
			return nil, err
		}
	}
	if m.cg != nil {
		cg, err := m.cg.newTask("slot-"+strconv.Itoa(slot), lim)
		if err != nil {
			return nil, err
		}
		t.cg = cg
	}
	return t, nil
}

// User is the user the task's commands run as (nil: the worker's own).
func (t *Task) User() *User {
	if t == nil {
		return nil
	}
	return t.user
}

// Close kills whatever the task left running, reads what the task used and
// removes its cgroup.
func (t *Task) Close() Usage {
	if t.cg == nil {
		return Usage{}
	}
	t.cg.kill()
	u := t.cg.usage()
	t.cg.remove()
	t.cg = nil
	return u
}

// Process is a started command.
type Process struct {
	cmd     *exec.Cmd
	control *os.File // nil outside namespaces
	status  *os.File
	pgid    int
	cg      *taskCgroup
	done    chan struct{}
	result  Result
	// output and copied: the command's output pipe and the end of its
	// copying.
	output *os.File
	copied chan struct{}
	// launched is closed when a spawned init got its command.
	launched chan struct{}
}

// Start starts a command of the task. Without namespaces the command is a
// plain child in its own process group with a parent-death signal.
func (t *Task) Start(c Command) (*Process, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	if t.m.cfg.Isolation == None || !t.m.namespaces {
		return t.startPlain(c)
	}
	spec := initSpec{Argv: c.Argv, Env: c.Env, MountProc: true, Hide: t.m.cfg.Hide,
		Namespaces: t.ns != nil, Restrict: t.m.restrict, TTY: c.TTY != nil}
	if t.ns.OwnNetwork() && t.ns.Network() == NetworkOutbound {
		spec.ResolvConf = t.m.resolvConf
	}
	if t.user != nil {
		spec.UID, spec.GID, spec.PrivateShm, spec.VarTmp = t.user.UID, t.user.GID, true, t.user.VarTmp
	}
	spec.Dir = c.Dir
	p, err := t.m.takeInit(t.slot)
	if err != nil {
		return nil, err
	}
	if err := p.launch(spec, c.Output, t.cg, t.ns, c.TTY); err != nil {
		return nil, err
	}
	return p, nil
}

// startPlain is the no-namespace path: a process group, the user's
// credentials and the cgroup if there are any.
func (t *Task) startPlain(c Command) (*Process, error) {
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	if len(c.Argv[0]) > 0 && c.Argv[0][0] != '/' {
		if p, err := lookPath(c.Argv[0], c.Env); err == nil {
			cmd.Path, cmd.Err = p, nil
		}
	}
	// The output pipe is the command's own file, not one exec copies
	// from: Wait then returns when the command exits, and its group is
	// killed at once, rather than when whatever it left running closes
	// the pipe.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating output pipe: %w", err)
	}
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = c.Dir, c.Env, outW, outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c.TTY != nil {
		// A session of its own (so also a process group of its own)
		// whose controlling terminal is the TTY.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = c.TTY, c.TTY, c.TTY
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	}
	if t.user != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(t.user.UID), Gid: uint32(t.user.GID), Groups: []uint32{}}
	}
	err = cmd.Start()
	outW.Close()
	if err != nil {
		outR.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, pgid: cmd.Process.Pid, cg: t.cg, done: make(chan struct{}), copied: make(chan struct{})}
	go func() {
		defer close(p.copied)
		_, _ = io.Copy(c.Output, outR)
	}()
	p.output = outR
	if t.cg != nil {
		// The command may fork before it joins; what it forks before
		// this point is still in its process group.
		_ = t.cg.add(cmd.Process.Pid)
	}
	go p.wait()
	return p, nil
}

// spawnInit starts an init in new PID and mount namespaces. It waits for
// its command (launch): starting the init (a Go program with its runtime
// and package initialisation to go through) is most of what the sandbox
// costs, so the worker starts each slot's next init ahead of time.
func (m *Manager) spawnInit() (*Process, error) {
	// The control channel is a socket pair, not a pipe: the task's
	// namespaces travel on it as descriptors (SCM_RIGHTS).
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating the sandbox control socket: %w", err)
	}
	var pipes [6]*os.File // control init/worker, status r/w, output r/w
	pipes[0], pipes[1] = os.NewFile(uintptr(pair[0]), "control"), os.NewFile(uintptr(pair[1]), "control")
	for i := 2; i < len(pipes); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range pipes[:i] {
				f.Close()
			}
			return nil, fmt.Errorf("creating sandbox pipe: %w", err)
		}
		pipes[i], pipes[i+1] = r, w
	}
	ctlR, ctlW, stR, stW, outR, outW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	argv := m.cfg.InitCommand
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{ctlR, stW}
	// No Pdeathsig here: the Go runtime's check that the parent is still
	// alive compares PIDs, which differ across the new PID namespace; the
	// init sets its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	err = cmd.Start()
	ctlR.Close()
	stW.Close()
	outW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		outR.Close()
		return nil, fmt.Errorf("starting the sandbox init: %w", err)
	}
	p := &Process{cmd: cmd, control: ctlW, status: stR, output: outR, done: make(chan struct{}),
		launched: make(chan struct{}), copied: make(chan struct{})}
	go p.wait()
	return p, nil
}

// launch hands a spawned init its command: it joins cg (before it can
// fork anything), its output goes to out, and it gets spec, with the
// descriptors of ns when spec.Namespaces and then tty's when set.
func (p *Process) launch(spec initSpec, out io.Writer, cg *taskCgroup, ns *Namespaces, tty *os.File) error {
	p.cg = cg
	if cg != nil {
		spec.InitCgroups = cg.initProcs()
		if err := cg.add(p.cmd.Process.Pid); err != nil {
			p.Kill()
			p.Wait()
			return err
		}
	}
	close(p.launched)
	go func() {
		defer close(p.copied)
		_, _ = io.Copy(out, p.output)
	}()
	b, _ := json.Marshal(spec)
	var fds []int
	if spec.Namespaces && ns != nil {
		for _, f := range ns.files() {
			fds = append(fds, int(f.Fd()))
		}
	}
	if tty != nil {
		fds = append(fds, int(tty.Fd()))
	}
	if err := sendSpec(p.control, append(b, '\n'), fds); err != nil {
		p.Kill()
		p.Wait()
		return fmt.Errorf("starting the sandbox init: %w", err)
	}
	return nil
}

// sendSpec writes the spec line on the control socket, the descriptors
// riding along with its first byte.
func sendSpec(control *os.File, line []byte, fds []int) error {
	raw, err := control.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	err = raw.Write(func(fd uintptr) bool {
		for len(line) > 0 {
			n, err := unix.SendmsgN(int(fd), line, oob, nil, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EAGAIN) {
				// Not expected on a blocking socket; let the poller wait.
				return false
			}
			if err != nil {
				sendErr = err
				return true
			}
			line, oob = line[n:], nil
		}
		return true
	})
	if err != nil {
		return err
	}
	return sendErr
}

// spare is a slot's next init, being started.
type spare struct {
	ready chan struct{}
	p     *Process
	err   error
}

// takeInit returns the slot's spare init (starting one if there is none or
// it died) and starts the next spare for the slot.
func (m *Manager) takeInit(slot int) (*Process, error) {
	m.mu.Lock()
	s := m.spares[slot]
	next := &spare{ready: make(chan struct{})}
	m.spares[slot] = next
	m.mu.Unlock()
	go func() {
		next.p, next.err = m.spawnInit()
		close(next.ready)
	}()
	if s != nil {
		<-s.ready
		if s.err == nil {
			select {
			case <-s.p.done:
			default:
				return s.p, nil
			}
		}
	}
	return m.spawnInit()
}

// closeSpares ends the spare inits (their control pipe closes, so they
// exit).
func (m *Manager) closeSpares() {
	m.mu.Lock()
	spares := m.spares
	m.spares = map[int]*spare{}
	m.mu.Unlock()
	for _, s := range spares {
		<-s.ready
		if s.err == nil {
			s.p.control.Close()
			s.p.Wait()
		}
	}
}

func (p *Process) wait() {
	defer close(p.done)
	waitErr := p.cmd.Wait()
	res := Result{Started: true, ExitCode: -1}
	if ps := p.cmd.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		res.User, res.System = ps.UserTime(), ps.SystemTime()
	}
	if p.control != nil {
		p.control.Close()
		select {
		case <-p.launched:
			// Everything in the namespace died with the init; give the
			// copying a moment to drain what they wrote.
			select {
			case <-p.copied:
			case <-time.After(2 * time.Second):
				p.output.Close()
				<-p.copied
			}
		default:
		}
		p.output.Close()
		var st initStatus
		line, _ := bufio.NewReader(p.status).ReadBytes('\n')
		p.status.Close()
		switch {
		case json.Unmarshal(line, &st) != nil:
			// The init was killed before it reported: a signal ended it.
			res.ExitCode = -1
		case !st.Started:
			res = Result{StartErr: errors.New(st.StartError)}
		default:
			res.ExitCode = st.ExitCode
			if st.Signal != 0 {
				res.ExitCode = -1
			}
			res.User, res.System = durationUsec(st.UserUsec), durationUsec(st.SystemUsec)
		}
	} else {
		var exitErr *exec.ExitError
		if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) && res.ExitCode == 0 {
			res.ExitCode = -1
		}
		// Leftovers of the group die with the command.
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		select {
		case <-p.copied:
		case <-time.After(2 * time.Second):
			// A process that left the group holds the pipe open; stop
			// reading rather than wait for it.
			p.output.Close()
			<-p.copied
		}
		p.output.Close()
	}
	p.result = res
}

// Kill ends the command and everything it started.
func (p *Process) Kill() {
	if p.cmd.Process == nil {
		return
	}
	if p.control == nil {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	} else {
		// Killing the init kills its whole PID namespace.
		_ = p.cmd.Process.Kill()
	}
	if p.cg != nil {
		p.cg.kill()
	}
}

// Wait waits for the command to end and returns how it ended.
func (p *Process) Wait() Result {
	<-p.done
	return p.result
}

// Done is closed when the command has ended.
func (p *Process) Done() <-chan struct{} { return p.done }
