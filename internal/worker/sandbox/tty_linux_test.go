package sandbox

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// startShell starts an interactive sh on a pseudo-terminal in task and
// returns the terminal's leader end, the output read from it and the
// process.
func startShell(t *testing.T, task *Task, dir string) (*os.File, *e2e.SyncBuffer, *Process) {
	t.Helper()
	leader, follower, err := pty.Open()
	require.NoError(t, err)
	t.Cleanup(func() { leader.Close() })
	var sandboxOut, out e2e.SyncBuffer
	p, err := task.Start(Command{Argv: []string{"sh", "-i"}, Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "MARK=tty-mark", "PS1=$ "}, Output: &sandboxOut, TTY: follower})
	follower.Close()
	require.NoError(t, err)
	go func() { _, _ = io.Copy(&out, leader) }()
	t.Cleanup(func() {
		p.Kill()
		p.Wait()
	})
	return leader, &out, p
}

// TestShellOnATerminal: a command started with a TTY reads what is typed
// on the terminal and has it as its controlling terminal, inside the same
// sandbox as the task's commands (its user, its PID namespace).
func TestShellOnATerminal(t *testing.T) {
	t.Parallel()
	for _, isolation := range []Isolation{Strict, None} {
		t.Run(string(isolation), func(t *testing.T) {
			t.Parallel()
			var m *Manager
			dir := t.TempDir()
			if isolation == Strict {
				m = needStrict(t, Config{})
			} else {
				var err error
				m, err = New(Config{Isolation: None})
				require.NoError(t, err)
			}
			task, err := m.NewTask(0, Limits{}, nil)
			require.NoError(t, err)
			defer task.Close()
			if isolation == Strict {
				dir = taskDir(t, m, task)
			}
			leader, out, p := startShell(t, task, dir)
			_, err = io.WriteString(leader, "echo \"mark=$MARK uid=$(id -u) tty=$(tty) pid1=$(cat /proc/1/comm)\"\n")
			require.NoError(t, err)
			want := fmt.Sprintf("mark=tty-mark uid=%d tty=/dev/pts/", os.Geteuid())
			if u := task.User(); u != nil {
				want = fmt.Sprintf("mark=tty-mark uid=%d tty=/dev/pts/", u.UID)
			}
			testclock.WaitFor(t, time.Minute, "the shell's answer", func() bool { return strings.Contains(out.String(), want) })
			if isolation == Strict {
				// PID 1 of the shell's namespace is the sandbox init, not
				// the machine's.
				require.NotContains(t, out.String(), "pid1=systemd")
			}
			_, err = io.WriteString(leader, "exit 7\n")
			require.NoError(t, err)
			select {
			case <-p.Done():
			case <-time.After(time.Minute):
				t.Fatalf("the shell did not exit; output: %s", out.String())
			}
			require.Equal(t, 7, p.Wait().ExitCode)
		})
	}
}
