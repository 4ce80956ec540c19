package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
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
		{[]string{"task", "rn"}, `unknown command "rn" for "hopper task"; did you mean "run"? (see hopper task --help)`},
		{[]string{"role", "creat"}, `unknown command "creat" for "hopper role"; did you mean "create"? (see hopper role --help)`},
		{[]string{"serve", "--lisen", "127.0.0.1:1"}, "unknown flag: --lisen; did you mean --listen? (see hopper serve --help)"},
		{[]string{"task", "run", "--task-queue", "a/b"}, "unknown flag: --task-queue; did you mean --task-queue-id? (see hopper task run --help)"},
		{[]string{"client", "create", "ci/builder"}, `required flag(s) "description" not set (see hopper client create --help)`},
		{[]string{"hook", "fires"}, "hopper hook fires takes 2 arguments, got 0 (see hopper hook fires --help)"},
		{[]string{"role", "update"}, "hopper role update takes 1 argument, got 0 (see hopper role update --help)"},
		{[]string{"index", "list", "a", "b"}, "hopper index list takes at most 1 argument, got 2 (see hopper index list --help)"},
		{[]string{"worker", "--root-url", "http://127.0.0.1:1", "--client-id", "c", "--access-token", "t"},
			"invalid worker config: no task queue to serve: set --task-queue-id <provisionerId>/<workerType> (taskQueueId in the config file) (see hopper worker --help)"},
		{[]string{"worker", "--task-queue-id", "a/b", "--config", "/nonexistent/worker.yaml"},
			"reading worker config: open /nonexistent/worker.yaml: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			root := rootCommand()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(tt.args)
			err := execute(root)
			require.EqualError(t, err, tt.want)
			var coded interface{ ExitCode() int }
			require.True(t, asExitCode(err, &coded))
			require.Equal(t, 64, coded.ExitCode())
		})
	}
}

// TestServeWithoutRootTokenIsUsage: `hopper serve` without its root token
// is a missing setting, exit 64, with a way to make one.
func TestServeWithoutRootTokenIsUsage(t *testing.T) {
	t.Setenv("HOPPER_ROOT_ACCESS_TOKEN", "")
	root := rootCommand()
	root.SetArgs([]string{"serve", "--data-dir", t.TempDir()})
	err := execute(root)
	require.ErrorContains(t, err, "HOPPER_ROOT_ACCESS_TOKEN is not set")
	require.ErrorContains(t, err, "openssl rand")
	var coded interface{ ExitCode() int }
	require.True(t, asExitCode(err, &coded))
	require.Equal(t, 64, coded.ExitCode())
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

// TestWorkerInterruptStopsPollingAtOnce: Ctrl-C on an idle worker ends
// its claimWork long-poll instead of waiting for the queue's empty answer,
// which comes 15–20 s after the call (the README's compatibility table): a
// worker that waited for it could not exit within the 10 s allowed here.
func TestWorkerInterruptStopsPollingAtOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	w := e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "cli-test/idle"})
	w.WaitPolling(t, &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}})
	require.NoError(t, w.Signal(os.Interrupt))
	select {
	case <-w.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the idle worker still waits for its long-poll; logs:\n%s", w.Logs())
	}
	require.Equal(t, worker.ExitDrained, w.ExitCode())
}

// TestWorkerSecondInterruptForces: the first Ctrl-C drains (the running
// task goes on), a second one stops the task now, as SIGTERM does: the
// worker exits 72 and the run ends exception/worker-shutdown, so the queue
// retries it.
func TestWorkerSecondInterruptForces(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	const queueID = "cli-test/force"
	w := e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: queueID})
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx := context.Background()
	taskID := tcclient.NewTaskID()
	now := time.Now()
	_, err := q.CreateTask(ctx, taskID, &tcclient.TaskDefinition{
		TaskQueueID: queueID, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload:  json.RawMessage(`{"command": [["sleep", "600"]], "maxRunTime": 900}`),
		Metadata: tcclient.TaskMetadata{Name: "long", Description: "d", Owner: "dev@example.com", Source: "https://example.com/x"},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := q.Status(ctx, taskID)
		return err == nil && st.State == tcclient.StateRunning
	}, 60*time.Second, 100*time.Millisecond)

	require.NoError(t, w.Signal(os.Interrupt))
	require.Eventually(t, func() bool { return strings.Contains(w.Logs(), "interrupt again") }, 10*time.Second, 50*time.Millisecond)
	select {
	case <-w.Done():
		t.Fatalf("the first interrupt must let the task run; logs:\n%s", w.Logs())
	case <-time.After(2 * time.Second):
	}
	st, err := q.Status(ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, tcclient.StateRunning, st.State, "draining leaves the task running")

	require.NoError(t, w.Signal(os.Interrupt))
	select {
	case <-w.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("a second interrupt did not stop the worker; logs:\n%s", w.Logs())
	}
	require.Equal(t, worker.ExitShutdown, w.ExitCode())
	st, err = q.Status(ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, "worker-shutdown", st.Runs[0].ReasonResolved)
}

// TestWorkerLogShowsMissingScopes: a worker whose client may not claim
// from its queue stops, and its log names the scope it misses, not only
// the sentence that announces it.
func TestWorkerLogShowsMissingScopes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	created, err := root.CreateClient(context.Background(), "workers/no-claim", &tcclient.ClientRequest{
		Expires: tcclient.NewTime(time.Now().Add(time.Hour)), Description: "may not claim",
		Scopes: []string{"queue:worker-id:e2e/w1"},
	})
	require.NoError(t, err)
	w := e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "cli-test/scopes", Config: map[string]any{
		"credentials": map[string]string{"clientId": "workers/no-claim", "accessToken": created.AccessToken},
	}})
	select {
	case <-w.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker did not stop; logs:\n%s", w.Logs())
	}
	require.Equal(t, 1, w.ExitCode())
	require.Contains(t, w.Logs(), "is missing the following scopes: queue:claim-work:cli-test/scopes")
	require.NotContains(t, w.Logs(), "errorCode")
}

// TestEnvCommentsRefused: an environment file's "# comment" after a value
// reaches hopper as part of the value (systemd's EnvironmentFile and
// docker --env-file keep it); hopper says so, naming the setting and never
// its value, instead of refusing the value or cutting it short.
func TestEnvCommentsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOPPER_LISTEN": "127.0.0.1:8080 # behind the proxy"}, "HOPPER_LISTEN has a comment after its value"},
		{map[string]string{"HOPPER_SECRET_KEY": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\t# optional"}, "HOPPER_SECRET_KEY has a comment"},
		{map[string]string{"HOPPER_DB": "postgres://hopper@db/hopper   # optional"}, "HOPPER_DB has a comment"},
		{map[string]string{"HOPPER_DB": "postgres://hopper@db/hopper#frag", "HOPPER_LISTEN": "127.0.0.1:8080"}, ""},
		{map[string]string{"HOPPER_DATA_DIR": "/srv/hopper # data"}, ""},
	} {
		err := checkEnvComments(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if tc.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.want)
		for _, v := range tc.env {
			require.NotContains(t, err.Error(), strings.Fields(v)[0], "the value is never shown")
		}
		var coded interface{ ExitCode() int }
		require.True(t, asExitCode(err, &coded))
		require.Equal(t, 64, coded.ExitCode())
	}
}
