package e2e_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/devmode"
	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestReadmeDevCommand follows the README as a newcomer would: `hopper dev`
// in an empty folder, the printed export line, then `hopper task run`.
func TestReadmeDevCommand(t *testing.T) {
	t.Parallel()
	bin := e2e.Binary(t)
	dir := t.TempDir()
	workerDir, err := devmode.WorkerDir(filepath.Join(dir, ".hopper"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(workerDir) }) // outside dir when run as root
	dev := exec.Command(bin, "dev", "--listen", e2e.FreePort(t))
	dev.Dir = dir
	dev.Env = os.Environ()
	stdout, err := dev.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	dev.Stderr = &stderr
	require.NoError(t, dev.Start())
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	t.Cleanup(func() {
		_ = dev.Process.Kill()
	})

	// The banner prints the export line; read until it appears.
	var env []string
	lines := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(60*time.Second, func() { _ = dev.Process.Kill() })
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "export ") {
			env = strings.Fields(strings.TrimPrefix(line, "export "))
			break
		}
	}
	deadline.Stop()
	require.Len(t, env, 3, "no export line from hopper dev; stderr:\n%s", stderr.String())
	go func() {
		for lines.Scan() { // keep draining the banner
		}
	}()
	require.DirExists(t, filepath.Join(dir, ".hopper"))

	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append([]string{"task", "run", "--"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		require.NoError(t, err)
		return string(out), 0
	}
	out, code := run("echo", "hello")
	require.Equal(t, 0, code, "output:\n%s", out)
	require.Contains(t, out, "hello")

	out, code = run("sh", "-c", "exit 3")
	require.NotEqual(t, 0, code, "a failing task must give a non-zero exit; output:\n%s", out)

	// Ctrl-C stops everything cleanly.
	require.NoError(t, dev.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		require.NoError(t, err, "hopper dev exit; stderr:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("hopper dev did not stop after SIGINT")
	}
}
