package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/worker"
)

// TestUsageErrorsExit64: every usage mistake, at any level, exits 64 with
// one line that says what to do.
func TestUsageErrorsExit64(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"zzz"}, `unknown command "zzz" (see hopper --help)`},
		{[]string{"tsak"}, `unknown command "tsak"; did you mean "task"? (see hopper --help)`},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag (see hopper --help)"},
		{[]string{"serve", "--no-such-flag"}, "unknown flag: --no-such-flag (see hopper serve --help)"},
		{[]string{"task", "nope"}, `unknown command "nope" for "hopper task" (see hopper task --help)`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			root := rootCommand()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(tt.args)
			err := root.Execute()
			require.EqualError(t, err, tt.want)
			var coded interface{ ExitCode() int }
			require.True(t, asExitCode(err, &coded))
			require.Equal(t, 64, coded.ExitCode())
		})
	}
}

// TestWorkerDrainIsNotAnError: SIGINT drains the real worker process, which
// exits 71 (generic-worker's "drained") and prints no "hopper:" error line.
func TestWorkerDrainIsNotAnError(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	w := e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "cli-test/drain"})
	require.Eventually(t, func() bool { return strings.Contains(w.Logs(), "worker starting") }, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, w.Signal(os.Interrupt))
	select {
	case <-w.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("worker did not drain; logs:\n%s", w.Logs())
	}
	require.Equal(t, worker.ExitDrained, w.ExitCode())
	require.Contains(t, w.Logs(), "worker drained")
	require.NotContains(t, w.Logs(), "hopper:")
}

// TestVersionNamesTheCommit builds hopper as a user does in a checkout
// (go build, with VCS stamping on whatever GOFLAGS says) and checks that
// `hopper --version` names the checkout's commit, not a placeholder.
func TestVersionNamesTheCommit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips building the hopper binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := e2e.RepoRoot()
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		// cmd/go looks for a .git directory; a `git worktree` has a file.
		t.Skip("Go stamps no VCS information in a git worktree; run this in a clone")
	}
	bin := filepath.Join(t.TempDir(), "hopper")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/hopper")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	out, err = exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	require.Regexp(t, `^hopper version \S+ \(.*built with go`, string(out))
	require.Contains(t, string(out), strings.TrimSpace(string(head))[:12], "names the commit it was built from")
}
