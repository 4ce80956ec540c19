package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTaskResolvConf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, machine, task string
		changed             bool
	}{
		{"a resolver elsewhere serves as it is", "nameserver 192.0.2.53\nsearch example.com\n", "", false},
		{"systemd-resolved's stub", "# managed\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch example.com\n",
			"# managed\nnameserver 10.0.2.3\noptions edns0 trust-ad\nsearch example.com\n", true},
		{"loopback resolvers give way to one forwarder, others stay", "nameserver 127.0.0.1\nnameserver ::1\nnameserver 192.0.2.53\n",
			"nameserver 10.0.2.3\nnameserver 192.0.2.53\n", true},
		{"no resolver", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task, changed := taskResolvConf(c.machine)
			require.Equal(t, c.changed, changed)
			if changed {
				require.Equal(t, c.task, task)
			}
		})
	}
}

// TestOutboundTaskSeesItsResolvConf: where the machine's resolvers are on
// its loopback, a task with an outbound network sees the resolver
// configuration the worker wrote at /etc/resolv.conf; the machine's file
// is left alone.
func TestOutboundTaskSeesItsResolvConf(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("needs slirp4netns")
	}
	machine, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Skip("this machine has no /etc/resolv.conf to cover")
	}
	m := needStrict(t, Config{Network: NetworkOutbound})
	require.True(t, m.taskNamespaces && !m.sharedNet, m.Summary())
	// As prepareResolvConf writes it for a machine whose resolver is
	// 127.0.0.53 (this one's may not be).
	m.resolvConf = filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(m.resolvConf, []byte("nameserver 10.0.2.3\n# written by the test\n"), 0o644))
	require.NoError(t, os.Chmod(filepath.Dir(m.resolvConf), 0o755))
	ns, err := m.NewNamespaces()
	require.NoError(t, err)
	defer ns.Close()
	task, err := m.NewTask(0, Limits{}, ns)
	require.NoError(t, err)
	defer task.Close()
	res, out := run(t, task, taskDir(t, m, task), `cat /etc/resolv.conf`)
	require.Equal(t, 0, res.ExitCode, out)
	require.Equal(t, "nameserver 10.0.2.3\n# written by the test\n", out)
	after, err := os.ReadFile("/etc/resolv.conf")
	require.NoError(t, err)
	require.Equal(t, string(machine), string(after))
}
