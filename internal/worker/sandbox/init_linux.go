package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The init's inherited descriptors: the worker writes the initSpec on
// control and keeps it open for the command's life (its end means the
// worker is gone); the init writes one initStatus line on status.
const (
	controlFD = 3
	statusFD  = 4
)

// initSpec is what the worker tells the init to run. It travels on the
// control pipe, not in argv or the environment, so the init itself runs
// with an empty environment (no LD_PRELOAD or GODEBUG from a payload into a
// root process) and the task's environment is not in /proc/1/cmdline.
type initSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Dir is the command's working directory.
	Dir string `json:"dir"`
	// UID and GID, when UID > 0, are the credentials the command gets.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// MountProc mounts a fresh /proc (the init is in new PID and mount
	// namespaces).
	MountProc bool `json:"mountProc"`
	// Hide lists files the command must not read whatever their mode
	// (the worker's config): each is covered with /dev/null.
	Hide []string `json:"hide,omitempty"`
	// PrivateShm gives /dev/shm a fresh tmpfs: the task's shared memory
	// files are its own.
	PrivateShm bool `json:"privateShm,omitempty"`
	// Namespaces says the control message carries the descriptors of the
	// task's IPC and network namespaces (Namespaces.files), which the
	// command joins; the init mounts a fresh mqueue for the IPC one.
	Namespaces bool `json:"namespaces,omitempty"`
	// VarTmp, when set, is the task's own directory mounted on /var/tmp.
	VarTmp string `json:"varTmp,omitempty"`
	// ResolvConf, when set, is mounted on /etc/resolv.conf: the machine's
	// resolvers are on its loopback, out of the task's network.
	ResolvConf string `json:"resolvConf,omitempty"`
	// Restrict sets no-new-privileges and the seccomp filter that refuses
	// user namespaces on the command (restrictThread).
	Restrict bool `json:"restrict,omitempty"`
	// TTY says the control message's last descriptor is the command's
	// terminal: its stdin, stdout and stderr, and its controlling
	// terminal (Command.TTY).
	TTY bool `json:"tty,omitempty"`
	// Probe makes the init only set itself up and report success.
	Probe bool `json:"probe,omitempty"`
	// InitCgroups are the cgroup.procs files the init moves itself to
	// once the command has started in the task's cgroups (taskCgroup).
	InitCgroups []string `json:"initCgroups,omitempty"`
}

// initStatus is the init's report: either why the command did not start,
// or how it ended.
type initStatus struct {
	StartError string `json:"startError,omitempty"`
	Started    bool   `json:"started"`
	ExitCode   int    `json:"exitCode"`
	Signal     int    `json:"signal,omitempty"`
	UserUsec   int64  `json:"userUsec"`
	SystemUsec int64  `json:"systemUsec"`
}

// IsInitInvocation reports whether this process was started as the sandbox
// init (its first argument is InitArg and the control pipe is there).
func IsInitInvocation() bool {
	return len(os.Args) > 1 && os.Args[1] == InitArg
}

// InitMain is the sandbox init: PID 1 of a task command's PID namespace.
// It sets a parent-death signal, waits for the worker's go-ahead (which
// comes after the worker put it into the task's cgroups), mounts a fresh
// /proc, starts the command with the task user's credentials, reaps every
// process that is re-parented to it, and exits when the command exits —
// at which point the kernel kills whatever else is left in the namespace.
// It returns the process exit code.
func InitMain() int {
	// Namespaces joined with setns, no-new-privileges and the seccomp
	// filter belong to a thread: this one, which starts the command.
	runtime.LockOSThread()
	// If the worker dies the kernel kills this init, and with it the whole
	// namespace. The control pipe covers the window before this call.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	control := os.NewFile(controlFD, "control")
	status := os.NewFile(statusFD, "status")
	if control == nil || status == nil {
		fmt.Fprintln(os.Stderr, "hopper sandbox init: started without its pipes")
		return 125
	}
	line, fds, err := readSpec(controlFD)
	if err != nil {
		// The worker is gone before it said go: nothing to run.
		return 125
	}
	var spec initSpec
	if err := json.Unmarshal(line, &spec); err != nil {
		report(status, initStatus{StartError: fmt.Sprintf("sandbox init: bad spec: %v", err)})
		return 125
	}
	tty := -1
	if spec.TTY {
		if len(fds) == 0 {
			report(status, initStatus{StartError: "sandbox init: no terminal descriptor came with the spec"})
			return 125
		}
		tty, fds = fds[len(fds)-1], fds[:len(fds)-1]
	}
	go func() {
		// EOF on the control pipe: the worker died or wants the command
		// gone. Exiting kills the namespace.
		_, _ = io.Copy(io.Discard, control)
		os.Exit(137)
	}()
	if spec.MountProc {
		if err := mountProc(); err != nil {
			report(status, initStatus{StartError: err.Error()})
			return 125
		}
		if spec.PrivateShm {
			if err := privateShm(); err != nil {
				report(status, initStatus{StartError: err.Error()})
				return 125
			}
		}
		for _, path := range spec.Hide {
			if err := unix.Mount("/dev/null", path, "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
				report(status, initStatus{StartError: fmt.Sprintf("sandbox init: hiding %s: %v", path, err)})
				return 125
			}
		}
		if spec.VarTmp != "" {
			if err := unix.Mount(spec.VarTmp, "/var/tmp", "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
				report(status, initStatus{StartError: fmt.Sprintf("sandbox init: mounting the task's /var/tmp: %v", err)})
				return 125
			}
		}
		if spec.ResolvConf != "" {
			if err := unix.Mount(spec.ResolvConf, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
				report(status, initStatus{StartError: fmt.Sprintf("sandbox init: mounting the task's /etc/resolv.conf: %v", err)})
				return 125
			}
		}
		if spec.Namespaces {
			if err := joinNamespaces(fds); err != nil {
				report(status, initStatus{StartError: err.Error()})
				return 125
			}
		}
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	if spec.Restrict {
		if err := restrictThread(); err != nil {
			report(status, initStatus{StartError: "sandbox init: " + err.Error()})
			return 125
		}
	}
	if spec.Probe {
		report(status, initStatus{Started: true})
		return 0
	}

	st := runCommand(spec, tty)
	report(status, st)
	switch {
	case !st.Started:
		return 127
	case st.Signal != 0:
		return 128 + st.Signal
	}
	return st.ExitCode
}

func report(w *os.File, st initStatus) {
	b, _ := json.Marshal(st)
	_, _ = w.Write(append(b, '\n'))
}

// mountProc makes mounts private to this namespace and mounts a /proc that
// shows this PID namespace only.
func mountProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("sandbox init: making mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("sandbox init: mounting /proc: %w", err)
	}
	return nil
}

// readSpec reads the spec line from the control socket, with the
// descriptors that came along with it.
func readSpec(fd int) ([]byte, []int, error) {
	var fds []int
	var data []byte
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fds, err
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return nil, fds, err
			}
			for _, m := range msgs {
				rights, err := unix.ParseUnixRights(&m)
				if err == nil {
					fds = append(fds, rights...)
				}
			}
		}
		if n == 0 {
			return nil, fds, io.EOF
		}
		data = append(data, buf[:n]...)
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return data[:i+1], fds, nil
		}
	}
}

// joinNamespaces moves this thread, which starts the command, into the
// task's IPC and network namespaces (descriptors in Namespaces.files
// order; the network one is absent where tasks share the worker's) and mounts the IPC namespace's own mqueue file system where the
// machine has one, so the task sees its own POSIX message queues only.
func joinNamespaces(fds []int) error {
	if len(fds) != 1 && len(fds) != 2 {
		return fmt.Errorf("sandbox init: got %d namespace descriptors, want 1 or 2", len(fds))
	}
	if err := unix.Setns(fds[0], unix.CLONE_NEWIPC); err != nil {
		return fmt.Errorf("sandbox init: joining the task's IPC namespace: %w", err)
	}
	if len(fds) == 2 {
		if err := unix.Setns(fds[1], unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("sandbox init: joining the task's network namespace: %w", err)
		}
	}
	err := unix.Mount("mqueue", "/dev/mqueue", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("sandbox init: mounting the task's /dev/mqueue: %w", err)
	}
	return nil
}

// privateShm gives the command its own /dev/shm (skipped where the
// machine has none).
func privateShm() error {
	err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("sandbox init: mounting the task's /dev/shm: %w", err)
	}
	return nil
}

// runCommand starts the command and reaps children until it exits; tty,
// when not -1, is the descriptor of its terminal.
func runCommand(spec initSpec, tty int) initStatus {
	if len(spec.Argv) == 0 {
		return initStatus{StartError: "empty command"}
	}
	path, err := lookPath(spec.Argv[0], spec.Env)
	if err != nil {
		return initStatus{StartError: err.Error()}
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return initStatus{StartError: fmt.Sprintf("opening %s: %v", os.DevNull, err)}
	}
	attr := &syscall.SysProcAttr{Setsid: true}
	if spec.UID > 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(spec.UID), Gid: uint32(spec.GID), Groups: []uint32{}}
	}
	files := []*os.File{devNull, os.Stdout, os.Stderr}
	if tty >= 0 {
		// The command leads a session of its own (Setsid) whose
		// controlling terminal is the task's terminal, its descriptor 0.
		t := os.NewFile(uintptr(tty), "tty")
		defer t.Close()
		files = []*os.File{t, t, t}
		attr.Setctty, attr.Ctty = true, 0
	}
	proc, err := os.StartProcess(path, spec.Argv, &os.ProcAttr{
		Dir: spec.Dir, Env: spec.Env, Files: files, Sys: attr,
	})
	devNull.Close()
	if err != nil {
		return initStatus{StartError: err.Error()}
	}
	// At the memory limit (or should the machine run out), the kernel
	// kills the command's processes (which inherit this from it) first:
	// not this init, whose end would end them all, nor the worker (both
	// keep the worker's -500).
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", proc.Pid), []byte("500"), 0)
	// This init leaves the task's cgroups, which the command keeps: at the
	// task's memory limit the kernel picks a victim among the cgroup's
	// processes only, and once the command had ended the init was the only
	// one left; an allocation of its own while a killed process's memory
	// was still being freed had it killed, and the command's exit status
	// lost (the task ended with -1 although its command exited 0). Lowering
	// its OOM score instead needs CAP_SYS_RESOURCE, which a worker in a
	// container often lacks; where it is held, the init is also never the
	// victim of the machine running out.
	for _, procs := range spec.InitCgroups {
		_ = os.WriteFile(procs, []byte("0"), 0)
	}
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0)
	st := initStatus{Started: true, ExitCode: -1}
reap:
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			break
		}
		if pid != proc.Pid {
			continue
		}
		switch {
		case ws.Exited():
			st.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			st.Signal = int(ws.Signal())
		}
		break reap
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		st.UserUsec = ru.Utime.Sec*1e6 + ru.Utime.Usec
		st.SystemUsec = ru.Stime.Sec*1e6 + ru.Stime.Usec
	}
	return st
}

// lookPath finds argv[0] in the PATH of the command's environment (the
// init's own environment is empty on purpose).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathVar := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: %w", name, exec.ErrNotFound)
}

// durationUsec converts microseconds to a Duration.
func durationUsec(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
