//go:build !linux

package sandbox

import (
	"errors"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// setup records that nothing of the sandbox exists outside Linux.
func (m *Manager) setup() {
	m.missing = append(m.missing, "PID and mount namespaces, cgroups and task users (Linux only)")
}

// Close does nothing outside Linux.
func (m *Manager) Close() {}

// IsInitInvocation is false outside Linux: there is no sandbox init.
func IsInitInvocation() bool { return false }

// InitMain is never used outside Linux.
func InitMain() int { return 125 }

// Task is one task's sandbox; outside Linux only a process group.
type Task struct {
	Limits Limits
}

// NewTask returns a task without isolation.
func (m *Manager) NewTask(slot int, lim Limits, _ *Namespaces) (*Task, error) {
	return &Task{Limits: lim}, nil
}

// Namespaces do not exist outside Linux.
type Namespaces struct{}

// NewNamespaces returns nil: tasks share the worker's namespaces.
func (m *Manager) NewNamespaces() (*Namespaces, error) { return nil, nil }

// Network is never asked for outside Linux.
func (ns *Namespaces) Network() Network { return "" }

// Listen is never called outside Linux.
func (ns *Namespaces) Listen(string) (net.Listener, error) {
	return nil, errors.New("task namespaces are Linux only")
}

// OwnNetwork is false: tasks share the worker's network.
func (ns *Namespaces) OwnNetwork() bool { return false }

// Close does nothing.
func (ns *Namespaces) Close() {}

// User is always nil outside Linux.
func (t *Task) User() *User { return nil }

// Own does nothing outside Linux.
func (t *Task) Own(string, ...string) error { return nil }

// Close reports no usage outside Linux.
func (t *Task) Close() Usage { return Usage{} }

// Process is a started command.
type Process struct {
	cmd    *exec.Cmd
	done   chan struct{}
	result Result
}

// Start runs the command in its own process group.
func (t *Task) Start(c Command) (*Process, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = c.Dir, c.Env, c.Output, c.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		_ = cmd.Wait()
		p.result = Result{Started: true, ExitCode: -1}
		if ps := cmd.ProcessState; ps != nil {
			p.result.ExitCode = ps.ExitCode()
			p.result.User, p.result.System = ps.UserTime(), ps.SystemTime()
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}()
	return p, nil
}

// Kill ends the command's process group.
func (p *Process) Kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// Wait waits for the command to end.
func (p *Process) Wait() Result {
	<-p.done
	return p.result
}

// Done is closed when the command has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// cgroups do not exist outside Linux.
type cgroups struct{}

// PeerUID cannot tell who owns a connection outside Linux.
func PeerUID(local, remote net.Addr) (int, error) {
	return -1, errors.New("peer credentials of TCP connections are only known on Linux")
}

// spare inits do not exist outside Linux.
type spare struct{}
