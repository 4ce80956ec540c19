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
)

// setup detects namespaces, cgroups and task users.
func (m *Manager) setup() {
	if err := m.probeNamespaces(); err != nil {
		m.missing = append(m.missing, "PID and mount namespaces: "+err.Error())
	} else {
		m.namespaces = true
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
	if m.cg == nil {
		return
	}
	for _, base := range m.cg.bases() {
		removeCgroup(base)
	}
}

// probeNamespaces starts the init once with nothing to run, which proves
// that PID and mount namespaces and a fresh /proc work here.
func (m *Manager) probeNamespaces() error {
	if len(m.cfg.InitCommand) == 0 {
		return errors.New("this program provides no sandbox init")
	}
	p, err := m.startInit(initSpec{Probe: true, MountProc: true}, io.Discard, "", nil)
	if err != nil {
		return err
	}
	res := p.Wait()
	if !res.Started {
		return res.StartErr
	}
	return nil
}

// Task is one task's sandbox: its cgroup, its user and its limits. Run its
// commands with Start, one at a time, and Close it at the end of the task.
type Task struct {
	m      *Manager
	user   *User
	cg     *taskCgroup
	Limits Limits
}

// NewTask prepares the sandbox of a task running in slot (0-based): it
// creates the task's cgroup with the limits and empties the slot user's
// home. In none mode it only remembers the slot.
func (m *Manager) NewTask(slot int, lim Limits) (*Task, error) {
	t := &Task{m: m, Limits: lim}
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
	// output and copied: the plain path's output pipe and the end of its
	// copying.
	output *os.File
	copied chan struct{}
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
	spec := initSpec{Argv: c.Argv, Env: c.Env, MountProc: true, Hide: t.m.cfg.Hide}
	if t.user != nil {
		spec.UID, spec.GID, spec.PrivateShm = t.user.UID, t.user.GID, true
	}
	return t.m.startInit(spec, c.Output, c.Dir, t.cg)
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

// startInit starts the init in new PID and mount namespaces, puts it into
// cg (if any), then sends it spec.
func (m *Manager) startInit(spec initSpec, out io.Writer, dir string, cg *taskCgroup) (*Process, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating sandbox pipe: %w", err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("creating sandbox pipe: %w", err)
	}
	argv := m.cfg.InitCommand
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{ctlR, stW}
	// No Pdeathsig here: the Go runtime's check that the parent is still
	// alive compares PIDs, which differ across the new PID namespace; the
	// init sets its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Start()
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		return nil, fmt.Errorf("starting the sandbox init: %w", err)
	}
	p := &Process{cmd: cmd, control: ctlW, status: stR, cg: cg, done: make(chan struct{})}
	go p.wait()
	if cg != nil {
		if err := cg.add(cmd.Process.Pid); err != nil {
			p.Kill()
			p.Wait()
			return nil, err
		}
	}
	b, _ := json.Marshal(spec)
	if _, err := ctlW.Write(append(b, '\n')); err != nil {
		p.Kill()
		p.Wait()
		return nil, fmt.Errorf("starting the sandbox init: %w", err)
	}
	return p, nil
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
