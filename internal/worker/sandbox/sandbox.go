// Package sandbox runs a task's commands so that nothing they start
// outlives the task and nothing they run can read the worker's secrets,
// with what Linux offers without a daemon:
//
//   - each command runs under a small init (the hopper binary re-executed,
//     see InitMain) that is PID 1 of a new PID namespace: when the command
//     ends, is killed, or the worker dies (the init holds a parent-death
//     signal and a pipe from the worker), the init exits and the kernel
//     kills every process left in the namespace, setsid daemons and double
//     forks included;
//   - the init mounts a fresh /proc in a private mount namespace, so a task
//     sees its own processes only (not /proc/<worker>/environ);
//   - each task runs in its own cgroup (v2, and the v1 memory and pids
//     hierarchies where those controllers live there) with memory and
//     process-count limits, whose peak memory and CPU time are read at the
//     end; leftover cgroups of a crashed worker are emptied at start;
//   - when the worker runs as root, commands run as an unprivileged user per
//     capacity slot, with their own home, /tmp directory and /var/tmp, so
//     the worker's files and other tasks' directories are out of reach;
//   - each task has IPC and network namespaces of its own (Namespaces):
//     shared memory and message queues die with it, and the machine's
//     loopback services are out of its reach, its outbound network going
//     through a user-mode stack or nowhere (Network);
//   - commands run with no-new-privileges and a seccomp filter that
//     refuses user namespaces (seccomp_linux.go says why a filter).
//
// Isolation "strict" refuses to start where any of this is missing,
// "auto" uses what there is and says what is missing, "none" runs commands
// as plain child processes in their own process group.
package sandbox

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Isolation is how much of the sandbox the worker insists on.
type Isolation string

// The isolation modes (`hopper worker --isolation`).
const (
	// Strict refuses to start unless every protection is available.
	Strict Isolation = "strict"
	// Auto uses every protection available and reports the others missing.
	Auto Isolation = "auto"
	// None runs commands as plain child processes of the worker.
	None Isolation = "none"

	// DefaultIsolation is the isolation of a worker configured without one.
	DefaultIsolation = Auto
)

// ParseIsolation checks an isolation name; "" means DefaultIsolation.
func ParseIsolation(s string) (Isolation, error) {
	switch Isolation(s) {
	case "":
		return DefaultIsolation, nil
	case Strict, Auto, None:
		return Isolation(s), nil
	}
	return "", fmt.Errorf("isolation %q: want strict, auto or none", s)
}

// Network is what a task in its own network namespace can reach.
type Network string

// The task networks (`hopper worker --task-network`).
const (
	// NetworkOutbound (the default) connects the task's namespace to the
	// machine's network through slirp4netns, a user-mode TCP/IP stack,
	// with its alias for the machine's loopback disabled: the task reaches
	// what the machine reaches, except services on the machine's loopback.
	NetworkOutbound Network = "outbound"
	// NetworkNone gives the task a loopback of its own and nothing else.
	NetworkNone Network = "none"

	// DefaultNetwork is the task network of a worker configured without one.
	DefaultNetwork = NetworkOutbound
)

// ParseNetwork checks a task network name; "" means DefaultNetwork.
func ParseNetwork(s string) (Network, error) {
	switch Network(s) {
	case "":
		return DefaultNetwork, nil
	case NetworkOutbound, NetworkNone:
		return Network(s), nil
	}
	return "", fmt.Errorf("task network %q: want outbound or none", s)
}

// InitArg is the argument that makes the hopper binary (or a test binary)
// act as the sandbox init; see InitMain.
const InitArg = "sandbox-init"

// SelfInit is the InitCommand of a program whose main calls InitMain when
// IsInitInvocation: the running binary itself, with InitArg.
func SelfInit() []string { return []string{"/proc/self/exe", InitArg} }

// Config configures a Manager.
type Config struct {
	// Isolation is the mode (default Auto).
	Isolation Isolation
	// Name identifies this worker's cgroups among other workers' on the
	// machine; it must be a valid file name.
	Name string
	// Slots is the number of concurrent tasks (the worker's capacity).
	Slots int
	// HomesDir holds the task users' home directories.
	HomesDir string
	// TasksDir is where task directories are made; task users must be able
	// to reach it.
	TasksDir string
	// UserPrefix names the task users: <prefix><slot> (default
	// "hopper-task-").
	UserPrefix string
	// MaxMemory and MaxProcesses are the limits every task gets and the
	// ceiling a payload may ask for (0: no limit).
	MaxMemory    int64
	MaxProcesses int
	// InitCommand starts the sandbox init: a program that calls InitMain
	// when started with these arguments, normally the running binary,
	// {"/proc/self/exe", InitArg}. Empty means the program offers no init,
	// so commands run without namespaces. It is explicit because
	// re-executing a program that does not dispatch to InitMain (a test
	// binary, say) would run that program instead.
	InitCommand []string
	// Hide lists files commands must not read whatever their mode, such
	// as the worker's config file; in the command's mount namespace each
	// is covered with /dev/null.
	Hide []string
	// Network is what tasks reach from their own network namespace
	// (default NetworkOutbound).
	Network Network
	// Logger receives warnings (nil: discarded).
	Logger *slog.Logger
}

// Limits are the resource limits of one task.
type Limits struct {
	// Memory is the memory limit in bytes (0: none).
	Memory int64
	// Processes is the process (and thread) count limit (0: none).
	Processes int
}

// Usage is what a task consumed, read from its cgroup at the end.
type Usage struct {
	// Known is false when there was no cgroup to read.
	Known bool
	// PeakMemory is the highest memory use in bytes (0 if unknown).
	PeakMemory int64
	// User and System are the CPU time of every process of the task.
	User, System time.Duration
	// OOMKills counts processes the kernel killed at the memory limit.
	OOMKills int
	// PeakProcesses is the highest process count (0 if unknown).
	PeakProcesses int
}

// String renders the usage for the end of a task log.
func (u Usage) String() string {
	if !u.Known {
		return "resource usage unknown (no cgroup)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CPU %.3f s (user %.3f s, system %.3f s)", (u.User + u.System).Seconds(), u.User.Seconds(), u.System.Seconds())
	if u.PeakMemory > 0 {
		fmt.Fprintf(&b, ", peak memory %s", FormatBytes(u.PeakMemory))
	}
	if u.PeakProcesses > 0 {
		fmt.Fprintf(&b, ", peak processes %d", u.PeakProcesses)
	}
	if u.OOMKills > 0 {
		fmt.Fprintf(&b, ", %d process(es) killed at the memory limit", u.OOMKills)
	}
	return b.String()
}

// FormatBytes renders n bytes in MiB with one decimal (KiB below 1 MiB).
func FormatBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// Command is one command of a task.
type Command struct {
	// Argv is the program and its arguments; a program without a slash is
	// looked up in the PATH of Env.
	Argv []string
	// Dir is the working directory.
	Dir string
	// Env is the complete environment.
	Env []string
	// Output receives stdout and stderr.
	Output io.Writer
	// TTY, when set, is a terminal (a pseudo-terminal's follower end):
	// the command's stdin, stdout and stderr, and the controlling terminal
	// of its session. The command then writes nothing to Output, which
	// still receives what the sandbox itself reports. The interactive
	// shell of a task runs so.
	TTY *os.File
}

// Result is how a command ended.
type Result struct {
	// Started is false when the command could not be started at all.
	Started  bool
	StartErr error
	// ExitCode is the exit status, or -1 when a signal ended the command.
	ExitCode int
	// User and System are the CPU time of the command's processes that
	// were waited for (all of them under the init).
	User, System time.Duration
}

// User is a task user: an unprivileged account for one capacity slot.
type User struct {
	Name     string
	UID, GID int
	// Home is the user's home directory, emptied before every task.
	Home string
	// Tmp is the user's temporary directory (TMPDIR), emptied before
	// every task. /tmp itself stays the machine's: mounting over it would
	// hide work directories that live there.
	Tmp string
	// VarTmp, emptied before every task, is what the task's commands see
	// at /var/tmp.
	VarTmp string
}
