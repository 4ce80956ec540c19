package e2e_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// envFile reads an environment file as docker --env-file does (and, for
// unquoted values, systemd's EnvironmentFile): blank lines and lines
// starting with # are skipped; the value is everything after the first
// "=", a trailing "# comment" included.
func envFile(t *testing.T, text string) []string {
	t.Helper()
	var env []string
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(line, " \t"), "=")
		require.True(t, ok, "an environment file line without '=': %q", line)
		env = append(env, name+"="+strings.TrimRight(value, " \t"))
	}
	return env
}

// TestProductionEnvFile starts `hopper serve` with nothing but the
// production guide's environment file, read as systemd and docker read
// it, its placeholders filled in: the server starts, listens where the
// file says, on the database it names (a fresh PostgreSQL database when
// HOPPER_TEST_POSTGRES is set, else the file's line is swapped for SQLite).
func TestProductionEnvFile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	addr := e2e.FreePort(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "hopper.db")
	if os.Getenv("HOPPER_TEST_POSTGRES") != "" {
		db = e2e.FreshPostgres(t)
	}
	text := e2e.DocExample(t, "production-env-file").Replace(t,
		"HOPPER_ROOT_ACCESS_TOKEN=…", "HOPPER_ROOT_ACCESS_TOKEN="+e2e.RootAccessToken,
		"HOPPER_SECRET_KEY=…", "HOPPER_SECRET_KEY=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
		"127.0.0.1:8080", addr,
		"postgres://hopper@db.example.com/hopper", db)
	env := append(envFile(t, text), "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir())
	cmd := exec.Command(e2e.Binary(t), "serve", "--data-dir", t.TempDir())
	cmd.Env = env
	logs := &e2e.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("hopper serve logs:\n%s", logs.String())
		}
	})
	err := testclock.Poll(context.Background(), 2*time.Minute, func() bool {
		select {
		case <-done:
			t.Fatalf("hopper serve exited with the guide's environment file:\n%s", logs.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/api/queue/v1/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	require.NoError(t, err)
}

// TestProductionSystemdInstall runs the production guide's install block
// as written, as root, in a mount namespace of its own whose /etc and
// /usr/local are overlays on the machine's (what the block writes there
// vanishes with the namespace): the binary, the unit and the environment
// file land where the unit expects them with the modes the guide gives,
// and the guide's `systemd-analyze verify` accepts the installed unit.
// Starting it (systemctl, journalctl) needs a machine booted with systemd,
// which the test machine is not.
func TestProductionSystemdInstall(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the install block writes to /etc and /usr/local: it runs as root only (as in CI)")
	}
	for _, tool := range []string{"unshare", "systemd-analyze", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: apt-get install systemd util-linux coreutils", tool)
		}
	}
	block := e2e.DocExample(t, "production-systemd-install")
	dir := t.TempDir()
	// What the guide has beside it: the binary built as it says, the
	// repository's deploy/ and the environment file of its example.
	require.NoError(t, os.Symlink(e2e.Binary(t), filepath.Join(dir, "hopper")))
	require.NoError(t, os.Symlink(filepath.Join(e2e.RepoRoot(), "deploy"), filepath.Join(dir, "deploy")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hopper.env"), []byte(e2e.DocExample(t, "production-env-file").Text), 0o644))
	overlays := t.TempDir()
	script := `set -e
for d in /etc /usr/local; do
	mkdir -p "` + overlays + `$d/upper" "` + overlays + `$d/work"
	mount -t overlay overlay -o "lowerdir=$d,upperdir=` + overlays + `$d/upper,workdir=` + overlays + `$d/work" "$d"
done
` + block.Text + `
stat -c '%a %n' /usr/local/bin/hopper /etc/systemd/system/hopper.service /etc/hopper /etc/hopper/hopper.env
`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the guide's install block:\n%s", out)
	require.Equal(t, "755 /usr/local/bin/hopper\n644 /etc/systemd/system/hopper.service\n700 /etc/hopper\n600 /etc/hopper/hopper.env\n", string(out),
		"systemd-analyze verify says nothing of a sound unit; then the installed files and their modes")
	_, err = os.Stat("/etc/hopper/hopper.env")
	require.True(t, os.IsNotExist(err), "the block wrote to the machine's /etc, not the namespace's overlay")
}
