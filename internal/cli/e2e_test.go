package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// These tests run the real binary: `hopper task` against `hopper serve`
// (and `hopper worker`), over HTTP, exactly as a user would.

type result struct {
	stdout, stderr string
	code           int
}

// hopper runs the binary with env and returns what it printed.
func hopper(ctx context.Context, t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, e2e.Binary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.code = exitErr.ExitCode()
	default:
		t.Fatalf("running hopper %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// cleanEnv is the test's environment without TASKCLUSTER_* variables, so
// a developer's own credentials never leak into the tests.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKCLUSTER_") {
			out = append(out, kv)
		}
	}
	return out
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	return v
}

type statusReply struct {
	TaskID string              `json:"taskId"`
	Status tcclient.TaskStatus `json:"status"`
}

func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test builds and runs hopper; skipped with -short")
	}
}

func TestEndToEndCreateStatusCancel(t *testing.T) {
	t.Parallel()
	needBinary(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	env := srv.Env()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	file := filepath.Join(t.TempDir(), "task.yml")
	require.NoError(t, os.WriteFile(file, []byte(`
taskQueueId: e2e/nobody
deadline: 1 hour
payload:
  command: [[echo, hi]]
  maxRunTime: 30
metadata:
  name: cli e2e
tags:
  purpose: test
`), 0o644))
	res := hopper(ctx, t, env, "task", "create", "--json", "-f", file)
	require.Equal(t, 0, res.code, res.stderr)
	created := decode[statusReply](t, res)
	taskID := created.TaskID
	require.Equal(t, tcclient.StatePending, created.Status.State)
	require.Equal(t, "e2e/nobody", created.Status.TaskQueueID)
	require.Equal(t, taskID, created.Status.TaskGroupID)

	// The human form names the task and links to it.
	res = hopper(ctx, t, env, "task", "status", taskID)
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "Name          cli e2e\nState         pending\nQueue         e2e/nobody\n")

	res = hopper(ctx, t, env, "task", "status", "--json", taskID)
	require.Equal(t, 0, res.code, res.stderr)
	st := decode[statusReply](t, res).Status
	require.Equal(t, tcclient.StatePending, st.State)
	require.Len(t, st.Runs, 1)

	res = hopper(ctx, t, env, "task", "cancel", "--json", taskID)
	require.Equal(t, 0, res.code, res.stderr)
	st = decode[statusReply](t, res).Status
	require.Equal(t, tcclient.StateException, st.State)
	require.Equal(t, "canceled", st.Runs[0].ReasonResolved)

	res = hopper(ctx, t, env, "task", "rerun", "--json", taskID)
	require.Equal(t, 0, res.code, res.stderr)
	st = decode[statusReply](t, res).Status
	require.Equal(t, tcclient.StatePending, st.State)
	require.Len(t, st.Runs, 2)
	require.Equal(t, "rerun", st.Runs[1].ReasonCreated)

	res = hopper(ctx, t, env, "task", "artifacts", "--json", taskID)
	require.Equal(t, 0, res.code, res.stderr)
	require.JSONEq(t, `{"taskId": "`+taskID+`", "artifacts": []}`, res.stdout)

	res = hopper(ctx, t, env, "task", "cancel", taskID)
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "Task "+taskID+": exception (run 1, canceled)\n", res.stdout)

	// The group (the task is its own group) is resolved, not completed.
	res = hopper(ctx, t, env, "task", "group", "--json", taskID)
	require.Equal(t, 1, res.code, res.stderr)
	summary := decode[struct {
		Total  int            `json:"total"`
		Done   bool           `json:"done"`
		Counts map[string]int `json:"counts"`
	}](t, res)
	require.Equal(t, 1, summary.Total)
	require.True(t, summary.Done)
	require.Equal(t, 1, summary.Counts["exception"])

	// Errors: the API's code and words, a non-zero exit.
	unknown := tcclient.NewTaskID()
	res = hopper(ctx, t, env, "task", "status", unknown)
	require.Equal(t, 1, res.code)
	require.Regexp(t, `^hopper: getting status of task `+regexp.QuoteMeta(unknown)+`: ResourceNotFound \(HTTP 404\): [^\n]+\n$`, res.stderr)

	res = hopper(ctx, t, nil, "task", "status", taskID)
	require.Equal(t, 64, res.code)
	require.Equal(t, "hopper: TASKCLUSTER_ROOT_URL is not set: point it at the queue's root URL, e.g. http://127.0.0.1:8080\n", res.stderr)

	// Without credentials the refusal names the missing setting, not the
	// scopes (the export line was not pasted).
	anonymous := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL}
	res = hopper(ctx, t, anonymous, "task", "cancel", taskID)
	require.Equal(t, 64, res.code)
	require.Equal(t, "hopper: TASKCLUSTER_CLIENT_ID is not set: cancelling task "+taskID+" needs credentials, and the server refused it without them; "+
		"set TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN (hopper dev prints the export line)\n", res.stderr)
}

// startWorker runs `hopper worker` for queue with the root credentials.
func startWorker(t *testing.T, srv *e2e.Server, queue string) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := json.Marshal(map[string]any{
		"rootUrl":       srv.RootURL,
		"credentials":   map[string]string{"clientId": srv.ClientID, "accessToken": srv.Token},
		"taskQueueId":   queue,
		"workerGroup":   "cli-e2e",
		"workerId":      "w1",
		"workDir":       filepath.Join(dir, "work"),
		"claimInterval": "200ms",
	})
	require.NoError(t, err)
	path := filepath.Join(dir, "worker.json")
	require.NoError(t, os.WriteFile(path, cfg, 0o600))
	var logs bytes.Buffer
	cmd := exec.Command(e2e.Binary(t), "worker", "--config", path, "--log-level", "warn")
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// SIGTERM makes the worker kill its tasks' process groups (a
		// cancelled task may still be running); SIGKILL would orphan them.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
}

func TestEndToEndRun(t *testing.T) {
	t.Parallel()
	needBinary(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	env := srv.Env()
	var b [4]byte
	_, _ = rand.Read(b[:])
	queue := fmt.Sprintf("cli-e2e/run-%x", b)
	startWorker(t, srv, queue)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Completed: the log streams to stdout and the artifact is published.
	res := hopper(ctx, t, env, "task", "run", "--task-queue-id", queue, "--env", "WHO=world",
		"--artifact", "out/greeting.txt", "--name", "greet", "--",
		"sh", "-c", `echo "hello $WHO"; mkdir -p out; echo saved > out/greeting.txt`)
	require.Equal(t, 0, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	m := regexp.MustCompile(`^Task (\S+) created on ` + regexp.QuoteMeta(queue) + `\n` + regexp.QuoteMeta(srv.RootURL) + `/ui/#/task/(\S+)\n`).FindStringSubmatch(res.stderr)
	require.NotNil(t, m, res.stderr)
	taskID := m[1]
	require.Equal(t, taskID, m[2])
	require.Contains(t, res.stdout, "hello world\n")
	require.Equal(t, 1, strings.Count(res.stdout, "hello world\n"), "each line once: %s", res.stdout)
	require.Contains(t, res.stderr, "Task "+taskID+" completed (run 0")

	res = hopper(ctx, t, env, "task", "artifact", "get", taskID, "public/out/greeting.txt")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "saved\n", res.stdout)

	res = hopper(ctx, t, env, "task", "log", taskID)
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "hello world\n")

	res = hopper(ctx, t, env, "task", "status", "--json", taskID)
	require.Equal(t, tcclient.StateCompleted, decode[statusReply](t, res).Status.State)

	// Failed: exit 1.
	res = hopper(ctx, t, env, "task", "run", "--json", "--task-queue-id", queue, "sh", "-c", "echo failing; exit 3")
	require.Equal(t, 1, res.code, res.stderr)
	require.Equal(t, tcclient.StateFailed, decode[statusReply](t, res).Status.State)
	require.Contains(t, res.stderr, "failing\n", "with --json the log goes to stderr")
	require.Regexp(t, `hopper: task \S+ failed \(run 0\)\n$`, res.stderr)

	// Exception: cancelled while running, exit 2 with the reason.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	cmd := exec.CommandContext(runCtx, e2e.Binary(t), "task", "run", "--task-queue-id", queue, "sh", "-c", "echo started; sleep 60")
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr syncWriter
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "started\n") }, time.Minute, 50*time.Millisecond,
		"the live log should stream while the task runs")
	m = regexp.MustCompile(`Task (\S+) created`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m)
	res = hopper(ctx, t, env, "task", "cancel", m[1])
	require.Equal(t, 0, res.code, res.stderr)
	err := cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	require.Equal(t, 2, exitErr.ExitCode(), "stderr: %s", stderr.String())
	require.Contains(t, stderr.String(), "hopper: task "+m[1]+" resolved as exception: canceled (run 0)\n")
}

// syncWriter is a buffer a child process writes while the test reads.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestErrorsShownWhole: a refusal shows what to fix, not only its first
// line, which ends at the colon before it: the scopes a client misses and
// every schema violation of a task file.
func TestErrorsShownWhole(t *testing.T) {
	t.Parallel()
	needBinary(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx := context.Background()
	dir := t.TempDir()
	root := srv.Env()

	res := hopper(ctx, t, root, "client", "create", "errors/weak", "--description", "reads tasks only", "--scope", "queue:get-task:*", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	weak := decode[struct {
		AccessToken string `json:"accessToken"`
	}](t, res)
	task := filepath.Join(dir, "task.yaml")
	require.NoError(t, os.WriteFile(task, []byte("payload: {command: [[echo]], maxRunTime: 10}\n"), 0o600))
	res = hopper(ctx, t, []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "TASKCLUSTER_CLIENT_ID=errors/weak", "TASKCLUSTER_ACCESS_TOKEN=" + weak.AccessToken},
		"task", "create", "-f", task)
	require.Equal(t, 1, res.code)
	require.Regexp(t, `^hopper: creating task \S+: InsufficientScopes \(HTTP 403\): Client ID errors/weak does not have sufficient scopes and is missing the following scopes:\n`+
		`  queue:create-task:project:none\n  queue:scheduler-id:-\n  one of:\n    queue:create-task:highest:hopper/default\n`, res.stderr)
	require.NotContains(t, res.stderr, "errorCode", "Taskcluster's details block is left out")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("priority: urgent\nretries: 200\npayload: {command: [[echo]], maxRunTime: 10}\n"), 0o600))
	res = hopper(ctx, t, root, "task", "create", "-f", bad)
	require.Equal(t, 1, res.code)
	require.Regexp(t, `^hopper: creating task \S+: InputValidationError \(HTTP 400\): request body does not match schema create-task-request:\n`+
		`  \* /priority: value must be one of [^\n]+\n  \* /retries: maximum: got 200, want 49\n$`, res.stderr)
}
