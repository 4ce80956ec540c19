// Package workere2e runs the real `hopper serve` and `hopper worker`
// binaries against each other: tasks created over HTTP are claimed, run as
// child processes and resolved, with logs and artifacts readable back.
package workere2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// rootClientID is the queue's built-in root client (server.RootClientID);
// the e2e test talks to the binary only over HTTP, like any client.
const rootClientID = "static/taskcluster/root"

type env struct {
	bin     string
	rootURL string
	token   string
	admin   *tcclient.Client
	// process is the server's (a test may kill it).
	process *os.Process
}

var shared *env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Building and starting the binaries takes a while; the tests
		// skip themselves (see needBinaries).
		os.Exit(m.Run())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "hopper-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	defer stopSharedDocker()
	bin := filepath.Join(dir, "hopper")
	build := exec.Command("go", "build", "-o", bin, "github.com/hopper-ci/hopper/cmd/hopper")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building hopper: %w", err)
	}
	srv, stop, err := launchServer(bin, filepath.Join(dir, "data"), "4s")
	if err != nil {
		return 0, err
	}
	defer stop()
	shared = srv
	return m.Run(), nil
}

// launchServer starts `hopper serve` on a free loopback port with its data
// in dataDir and the given claim timeout, and waits until it answers. The
// returned function stops it.
func launchServer(bin, dataDir, claimTimeout string) (*env, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	var tok [33]byte
	_, _ = rand.Read(tok[:])
	return launchServerAt(bin, dataDir, claimTimeout, addr, base64.RawURLEncoding.EncodeToString(tok[:]))
}

// launchServerAt is launchServer on a given address with a given root
// token: a server started again where one stopped, as after a restart.
func launchServerAt(bin, dataDir, claimTimeout, addr, token string) (*env, func(), error) {
	return launchReplica(bin, dataDir, addr, token, []string{"--claim-timeout", claimTimeout}, nil)
}

// launchReplica is launchServerAt with further flags and environment: a
// replica sharing a database (--db) and a secret (HOPPER_SECRET_KEY).
func launchReplica(bin, dataDir, addr, token string, args, environ []string) (*env, func(), error) {
	serve := exec.Command(bin, append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--log-level", "warn"}, args...)...)
	serve.Env = append(append(os.Environ(), "HOPPER_ROOT_ACCESS_TOKEN="+token), environ...)
	serve.Stdout, serve.Stderr = os.Stderr, os.Stderr
	if err := serve.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting hopper serve: %w", err)
	}
	stop := func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = serve.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = serve.Process.Kill()
		}
	}
	rootURL := "http://" + addr
	err := testclock.Poll(context.Background(), 2*time.Minute, func() bool {
		resp, err := http.Get(rootURL + "/api/queue/v1/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("hopper serve did not become ready: %w", err)
	}
	return &env{bin: bin, rootURL: rootURL, token: token, process: serve.Process, admin: &tcclient.Client{
		RootURL: rootURL, Credentials: &tcclient.Credentials{ClientID: rootClientID, AccessToken: token},
	}}, stop, nil
}

// uniqueQueue returns a fresh task queue, so that repeated runs (-count)
// against the shared server never see each other's retry runs.
func uniqueQueue(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("e2e/%s-%x", prefix, b)
}

// needBinaries skips the test in -short mode, where TestMain did not build
// and start the binaries.
func needBinaries(t *testing.T) {
	t.Helper()
	if shared == nil {
		t.Skip("end-to-end test needs the hopper binaries; not run with -short")
	}
}

// worker is a running `hopper worker` process.
type worker struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// configFile is the worker's config file (credentials included).
	configFile string
}

// startWorker starts a worker for queue that exits after n tasks (0 = no
// limit).
func startWorker(t *testing.T, queue string, n int) *worker {
	t.Helper()
	dir := reachableDir(t)
	o := workerOpts{id: strings.ReplaceAll(strings.Split(queue, "/")[1], "/", "-"), tasks: n}
	// The worker must not hand its credentials to tasks even when they
	// arrive through the environment.
	return launchWorker(t, dir, workerConfig(shared, queue, dir, o), "TASKCLUSTER_ACCESS_TOKEN="+shared.token)
}

func (w *worker) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(timeout):
		t.Fatalf("worker did not exit within %s", timeout)
	}
	if w.err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	require.ErrorAs(t, w.err, &exitErr)
	return exitErr.ExitCode()
}

func createTask(t *testing.T, queue string, pl map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(pl)
	require.NoError(t, err)
	now := time.Now()
	id := tcclient.NewTaskID()
	_, err = shared.admin.CreateTask(context.Background(), id, &tcclient.TaskDefinition{
		TaskQueueID: queue,
		Created:     tcclient.NewTime(now),
		Deadline:    tcclient.NewTime(now.Add(time.Hour)),
		Payload:     raw,
		Metadata:    tcclient.TaskMetadata{Name: "e2e", Description: "worker e2e", Owner: "e2e@example.com", Source: "https://example.com/e2e"},
	})
	require.NoError(t, err)
	return id
}

func artifactText(t *testing.T, taskID string, runID int, name string) string {
	t.Helper()
	red, err := shared.admin.GetArtifact(context.Background(), taskID, runID, name)
	require.NoError(t, err)
	resp, err := http.Get(red.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

func status(t *testing.T, taskID string) *tcclient.TaskStatus {
	t.Helper()
	st, err := shared.admin.Status(context.Background(), taskID)
	require.NoError(t, err)
	return st
}

func TestCompletedAndFailed(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("results")
	ok := createTask(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `echo "hello $TASK_ID"; mkdir out; echo result > out/r.txt; env | grep -c "$SECRET_CHECK" || true`}},
		"env":     map[string]string{"SECRET_CHECK": shared.token[:20]},
		"artifacts": []map[string]any{
			{"type": "directory", "path": "out", "name": "public/out"},
		},
		"maxRunTime": 60,
	})
	bad := createTask(t, queue, map[string]any{"command": [][]string{{"sh", "-c", "echo failing; exit 2"}}, "maxRunTime": 60})
	malformed := createTask(t, queue, map[string]any{"command": "not a list", "maxRunTime": 60})
	w := startWorker(t, queue, 3)
	require.Equal(t, 0, w.wait(t, 90*time.Second))

	st := status(t, ok)
	require.Equal(t, tcclient.StateCompleted, st.State)
	log := artifactText(t, ok, 0, "public/logs/live_backing.log")
	require.Contains(t, log, "hello "+ok)
	require.Contains(t, log, "Task resolution: completed")
	// grep -c counted the env lines that contain the token prefix: the
	// only one is SECRET_CHECK itself.
	require.Contains(t, log, "\n1\n")
	require.Equal(t, "result\n", artifactText(t, ok, 0, "public/out/r.txt"))
	// The live log was switched to a link to the backing log.
	require.Equal(t, log, artifactText(t, ok, 0, "public/logs/live.log"))

	require.Equal(t, tcclient.StateFailed, status(t, bad).State)
	require.Contains(t, artifactText(t, bad, 0, "public/logs/live_backing.log"), "Exit Code: 2")

	st = status(t, malformed)
	require.Equal(t, tcclient.StateException, st.State)
	require.Equal(t, tcclient.ReasonMalformedPayload, st.Runs[0].ReasonResolved)
	require.Contains(t, artifactText(t, malformed, 0, "public/logs/live_backing.log"), "payload.command: got string, want array")
}

func TestCancelKillsTask(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("cancel")
	hb := heartbeatDir(t)
	id := createTask(t, queue, map[string]any{
		"command":    [][]string{{"sh", "-c", `(` + heartbeat("child") + `) & ` + heartbeat("main")}},
		"env":        map[string]string{"HB": hb},
		"maxRunTime": 600,
	})
	w := startWorker(t, queue, 1)
	files := []string{filepath.Join(hb, "child"), filepath.Join(hb, "main")}
	waitAlive(t, true, "the task's processes", files...)
	_, err := shared.admin.CancelTask(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 0, w.wait(t, 2*time.Minute))
	waitAlive(t, false, "the cancelled task's processes to end", files...)
	st := status(t, id)
	require.Equal(t, "canceled", st.Runs[0].ReasonResolved)
	// The cancelled run keeps its log (the queue takes artifacts on a run
	// resolved exception for a while): what the task wrote, then why it
	// stopped; the live log now links to it.
	log := backingLog(t, id, 0)
	require.Contains(t, log, "Executing command 0")
	require.Contains(t, log, "=== Task Stopped ===")
	require.Contains(t, log, "run 0 is now exception (canceled)")
	arts := artifactsByName(t, id, 0)
	require.Equal(t, tcclient.StorageLink, arts["public/logs/live.log"].StorageType, "the live log links to the uploaded log")
}

func TestSIGTERMResolvesWorkerShutdown(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("sigterm")
	id := createTask(t, queue, map[string]any{"command": [][]string{{"sh", "-c", "echo started; sleep 120"}}, "maxRunTime": 600})
	w := startWorker(t, queue, 0)
	waitLiveLog(t, id, "started")
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 72, w.wait(t, 30*time.Second))
	st := status(t, id)
	require.Equal(t, tcclient.ReasonWorkerShutdown, st.Runs[0].ReasonResolved)
	require.Equal(t, tcclient.StatePending, st.State, "worker-shutdown gets an immediate retry run")
	require.Contains(t, artifactText(t, id, 0, "public/logs/live_backing.log"), "Worker is shutting down")
}
