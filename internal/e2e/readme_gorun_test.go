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

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestReadmeGoRunDev runs the README's `go run ./cmd/hopper dev` as
// written, in the repository (so go run compiles this tree, from Go's
// build cache once the test binary's hopper is built): it prints the
// export line, a task runs with it, and Ctrl-C (SIGINT to the process
// group, as a terminal sends it) stops go run and hopper both. Only the
// environment differs from a newcomer's: a free port (HOPPER_LISTEN), a
// data directory outside the tree (HOPPER_DATA_DIR) and a TMPDIR of the
// test's own, where go run keeps its binary.
func TestReadmeGoRunDev(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips compiling and running hopper")
	}
	block := e2e.DocExample(t, "readme-go-run-dev")
	e2e.Binary(t) // fills Go's build cache for go run's compile
	tmp, data := t.TempDir(), t.TempDir()
	dev := exec.Command("bash", "-c", block.Text)
	dev.Dir = e2e.RepoRoot()
	dev.Env = append(os.Environ(), "HOPPER_LISTEN="+e2e.FreePort(t), "HOPPER_DATA_DIR="+data, "TMPDIR="+tmp)
	dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := dev.StdoutPipe()
	require.NoError(t, err)
	stderr := &e2e.SyncBuffer{}
	dev.Stderr = stderr
	require.NoError(t, dev.Start())
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-dev.Process.Pid, syscall.SIGKILL) })

	var env []string
	lines := bufio.NewScanner(stdout)
	// go run compiles first: minutes on a loaded machine with a cold cache.
	deadline := time.AfterFunc(10*time.Minute, func() { _ = syscall.Kill(-dev.Process.Pid, syscall.SIGKILL) })
	for lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "export ") {
			env = strings.Fields(strings.TrimPrefix(line, "export "))
			break
		}
	}
	deadline.Stop()
	require.Len(t, env, 3, "no export line from the README's go run; stderr:\n%s", stderr.String())
	rest := &e2e.SyncBuffer{}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for lines.Scan() { // keep draining the banner
			rest.Write([]byte(lines.Text() + "\n"))
		}
	}()

	out, errOut, code := hopperCLI(t, env, "task", "run", "--", "echo", "hello from go run")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Contains(t, out, "hello from go run")

	require.NoError(t, syscall.Kill(-dev.Process.Pid, syscall.SIGINT))
	select {
	case err := <-exited:
		// go run itself exits 1 once interrupted, whatever its program
		// does (cmd/go's builder sets exit status 1 on an interrupt while
		// the run action waits), and prints nothing more: hopper's own
		// clean stop is its "stopping…" and an empty stderr beyond the
		// start's warnings.
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
			t.Fatalf("go run ./cmd/hopper dev after Ctrl-C: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("go run ./cmd/hopper dev did not stop after Ctrl-C")
	}
	<-drained
	require.Contains(t, rest.String(), "stopping…")
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		require.NotContains(t, line, "level=ERROR", "hopper dev stops without errors")
	}
	leftovers, err := filepath.Glob(filepath.Join(tmp, "go-build*"))
	require.NoError(t, err)
	require.Empty(t, leftovers, "go run removes its binary once hopper exits")
}

// TestReadmeFirstCommands: the README's first block is the two commands
// a newcomer runs. Its go run is TestReadmeGoRunDev's command; its go test
// line runs as written on a module of one test that reads the timeout
// the command gave it, for the whole suite cannot run inside itself (CI,
// .ci/run, runs the suite with the same -timeout).
func TestReadmeFirstCommands(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running go test")
	}
	block := e2e.DocExample(t, "readme-first-commands")
	lines := strings.Split(strings.TrimSpace(block.Text), "\n")
	require.Len(t, lines, 2, "the README's first block: go run, then go test")
	goRun, _, _ := strings.Cut(lines[0], "#")
	require.Equal(t, strings.TrimSpace(e2e.DocExample(t, "readme-go-run-dev").Text), strings.TrimSpace(goRun),
		"the first command is the one TestReadmeGoRunDev runs")

	mod := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module readme.example/tiny\n\ngo 1.22\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "tiny_test.go"), []byte(`package tiny

import (
	"flag"
	"testing"
)

func TestTimeout(t *testing.T) {
	t.Logf("test.timeout=%s", flag.Lookup("test.timeout").Value)
}
`), 0o644))
	cmd := exec.Command("bash", "-ec", lines[1])
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "GOFLAGS=-count=1 -v")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\n%s", lines[1], out)
	require.Contains(t, string(out), "test.timeout=30m0s", "the README's go test gives the suite 30 minutes")
	require.Contains(t, string(out), "ok  \treadme.example/tiny")
}
