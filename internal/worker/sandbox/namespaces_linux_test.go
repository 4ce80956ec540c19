package sandbox

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// echoServer answers every connection on the machine's loopback with
// message, until the test ends.
func echoServer(t *testing.T, message string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(message + "\n"))
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestTaskNamespaces runs two commands of one task in its namespaces and
// one of another task, with the network of the task's own (none) and, as
// auto mode falls back to without slirp4netns, the worker's: the IPC
// namespace is the task's in both, the machine's loopback is reachable
// only in the second, and a listener opened with Listen is the task's.
func TestTaskNamespaces(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"ipcmk", "ipcs", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	port := echoServer(t, "MACHINE-LOOPBACK")
	probe := `(exec 3<>/dev/tcp/127.0.0.1/` + port + ` && head -1 <&3) 2>/dev/null || echo "loopback: unreachable"`
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "own network", true: "shared network"}[shared]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := needStrict(t, Config{Network: NetworkNone})
			require.True(t, m.taskNamespaces, m.Summary())
			m.sharedNet = shared
			ns, err := m.NewNamespaces()
			require.NoError(t, err)
			defer ns.Close()
			require.Equal(t, !shared, ns.OwnNetwork())
			task, err := m.NewTask(0, Limits{}, ns)
			require.NoError(t, err)
			defer task.Close()
			dir := taskDir(t, m, task)
			res, out := run(t, task, dir, `ipcmk -M 4321000 >/dev/null; grep NoNewPrivs /proc/self/status; bash -c '`+probe+`'`)
			require.Equal(t, 0, res.ExitCode, out)
			require.Regexp(t, `NoNewPrivs:\s+1`, out)
			if shared {
				require.Contains(t, out, "MACHINE-LOOPBACK")
			} else {
				require.Contains(t, out, "loopback: unreachable")
				ln, err := ns.Listen("127.0.0.1:0")
				require.NoError(t, err)
				defer ln.Close()
				go func() {
					c, err := ln.Accept()
					if err == nil {
						_, _ = c.Write([]byte("TASK-LISTENER\n"))
						c.Close()
					}
				}()
				_, lport, _ := net.SplitHostPort(ln.Addr().String())
				res, out = run(t, task, dir, `bash -c '(exec 3<>/dev/tcp/127.0.0.1/`+lport+` && head -1 <&3)'`)
				require.Equal(t, 0, res.ExitCode, out)
				require.Contains(t, out, "TASK-LISTENER", "the task reaches a listener in its namespace")
			}
			res, out = run(t, task, dir, `ipcs -m | grep -c 4321000`)
			require.Equal(t, "1", strings.TrimSpace(out), "the task's next command shares its IPC namespace")
			other, err := m.NewNamespaces()
			require.NoError(t, err)
			defer other.Close()
			task2, err := m.NewTask(0, Limits{}, other)
			require.NoError(t, err)
			defer task2.Close()
			_, out = run(t, task2, taskDir(t, m, task2), `ipcs -m | grep -c 4321000`)
			require.Equal(t, "0", strings.TrimSpace(out), "another task sees the segment")
		})
	}
}
