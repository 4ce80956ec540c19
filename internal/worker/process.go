package worker

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// commandResult is how one command ended.
type commandResult struct {
	// started is false when the process could not be started at all.
	started  bool
	startErr error
	// exitCode is the process exit status, or -1 when killed by a signal.
	exitCode int
	// aborted is set when the worker killed the process group, with why.
	aborted     bool
	abortReason string
	wall        time.Duration
	user, sys   time.Duration
}

// stopSignal tells a running command why it must die.
type stopSignal struct {
	reason string
}

// runProcess runs argv in dir with env, output to out, in its own process
// group. It returns when the process exits or, if a value arrives on stop,
// after SIGKILLing the whole group. Leftover processes of the group (e.g.
// backgrounded grandchildren) are always killed when the command ends, so
// nothing a command started outlives it.
func runProcess(argv []string, dir string, env []string, out io.Writer, stop <-chan stopSignal) commandResult {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// If the worker is killed outright (no chance to kill the group), the
	// kernel kills the task's direct child too (Linux; see setDeathSignal).
	setDeathSignal(cmd.SysProcAttr)
	// A grandchild that escaped the group could hold the output pipe open
	// forever; do not wait for it longer than this.
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return commandResult{startErr: err}
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	res := commandResult{started: true}
	var waitErr error
	select {
	case waitErr = <-done:
	case sig := <-stop:
		res.aborted, res.abortReason = true, sig.reason
		killGroup(pgid)
		waitErr = <-done
	}
	killGroup(pgid)
	res.wall = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		res.user, res.sys = ps.UserTime(), ps.SystemTime()
		res.exitCode = ps.ExitCode()
	} else {
		res.exitCode = -1
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) && res.exitCode == 0 {
		res.exitCode = -1
	}
	return res
}

// killGroup sends SIGKILL to every process in the group.
func killGroup(pgid int) {
	if pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
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
