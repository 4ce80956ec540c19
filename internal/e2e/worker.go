package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Worker is a running `hopper worker`.
type Worker struct {
	// WorkDir holds the worker's task directories and caches.
	WorkDir string
	// taskQueueID, workerGroup and workerID are what the worker serves
	// and is called (WaitPolling).
	taskQueueID, workerGroup, workerID string
	cmd                                *exec.Cmd
	logs                               *SyncBuffer
	done                               chan struct{}
}

// WorkerOptions tune StartWorker.
type WorkerOptions struct {
	// TaskQueueID is the queue served (default "e2e/worker").
	TaskQueueID string
	// WorkerGroup and WorkerID identify the worker (default "e2e" and
	// "w1"); workers sharing a server need distinct ids.
	WorkerGroup, WorkerID string
	// Capacity is the number of concurrent runs (default 1).
	Capacity int
	// ClaimInterval is the gap between claimWork calls (default 200ms, far
	// below production's 5 s, so tests do not wait for polls).
	ClaimInterval time.Duration
	// Config holds further top-level keys of the worker's configuration
	// file, e.g. "superseding": {"order": "descending"}.
	Config map[string]any
	// Args are extra command-line flags.
	Args []string
	// Env are extra KEY=VALUE pairs.
	Env []string
}

// StartWorker runs `hopper worker` against srv with the root client's
// credentials, configured through a JSON file (valid YAML) in a fresh work
// directory. It is stopped when the test ends.
func StartWorker(t testing.TB, srv *Server, opts WorkerOptions) *Worker {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	if opts.TaskQueueID == "" {
		opts.TaskQueueID = "e2e/worker"
	}
	if opts.WorkerGroup == "" {
		opts.WorkerGroup = "e2e"
	}
	if opts.WorkerID == "" {
		opts.WorkerID = "w1"
	}
	if opts.Capacity == 0 {
		opts.Capacity = 1
	}
	if opts.ClaimInterval == 0 {
		opts.ClaimInterval = 200 * time.Millisecond
	}
	cfg := map[string]any{
		"rootUrl":       srv.RootURL,
		"credentials":   map[string]string{"clientId": srv.ClientID, "accessToken": srv.Token},
		"taskQueueId":   opts.TaskQueueID,
		"workerGroup":   opts.WorkerGroup,
		"workerId":      opts.WorkerID,
		"capacity":      opts.Capacity,
		"workDir":       filepath.Join(dir, "work"),
		"claimInterval": opts.ClaimInterval.String(),
	}
	for k, v := range opts.Config {
		cfg[k] = v
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatalf("encoding worker config: %v", err)
	}
	cfgPath := filepath.Join(dir, "worker.yml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatalf("writing worker config: %v", err)
	}
	args := append([]string{"worker", "--config", cfgPath, "--log-level", "debug"}, opts.Args...)
	cmd := exec.Command(bin, args...)
	// The worker must not pick up a developer's TASKCLUSTER_* settings.
	cmd.Env = append(filteredEnv("TASKCLUSTER_"), opts.Env...)
	logs := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting hopper worker: %v", err)
	}
	w := &Worker{WorkDir: filepath.Join(dir, "work"), taskQueueID: opts.TaskQueueID, workerGroup: opts.WorkerGroup, workerID: opts.WorkerID,
		cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.Stop()
		if t.Failed() {
			t.Logf("hopper worker %s/%s logs:\n%s", opts.WorkerGroup, opts.WorkerID, w.Logs())
		}
	})
	return w
}

// WaitPolling waits until the queue behind q knows the worker, so its
// first claimWork is under way (the package's WaitPolling).
func (w *Worker) WaitPolling(t testing.TB, q *tcclient.Client) {
	t.Helper()
	WaitPolling(t, q, w.taskQueueID, w.workerGroup, w.workerID)
}

// Logs returns what the worker wrote so far.
func (w *Worker) Logs() string { return w.logs.String() }

// Signal sends a signal to the worker process (SIGTERM: immediate
// shutdown; SIGINT: drain).
func (w *Worker) Signal(sig os.Signal) error { return w.cmd.Process.Signal(sig) }

// Done is closed when the process has exited.
func (w *Worker) Done() <-chan struct{} { return w.done }

// ExitCode is the process exit code once Done is closed (-1 before).
func (w *Worker) ExitCode() int {
	select {
	case <-w.done:
		return w.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Stop shuts the worker down at once (SIGTERM: an open claimWork
// long-poll ends, running tasks are aborted and resolved
// exception/worker-shutdown), then kills it if it has not exited within
// 30 s. Send os.Interrupt with Signal to drain instead.
func (w *Worker) Stop() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// filteredEnv returns the environment without variables starting with
// prefix.
func filteredEnv(prefix string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if len(kv) >= len(prefix) && kv[:len(prefix)] == prefix {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// PoolWorkerOptions tune StartPoolWorker.
type PoolWorkerOptions struct {
	WorkerPoolID, WorkerGroup, WorkerID string
	// SecretFile holds the worker's static secret.
	SecretFile string
	// Args are extra command-line flags.
	Args []string
}

// StartPoolWorker runs `hopper worker --worker-pool` against srv: no
// credentials, only the static secret; its config comes from the pool.
func StartPoolWorker(t testing.TB, srv *Server, opts PoolWorkerOptions) *Worker {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"worker", "--root-url", srv.RootURL, "--worker-pool", opts.WorkerPoolID,
		"--worker-group", opts.WorkerGroup, "--worker-id", opts.WorkerID, "--static-secret-file", opts.SecretFile,
		"--work-dir", filepath.Join(dir, "work"), "--log-level", "debug"}, opts.Args...)
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = filteredEnv("TASKCLUSTER_")
	logs := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting hopper worker: %v", err)
	}
	w := &Worker{WorkDir: filepath.Join(dir, "work"), taskQueueID: opts.WorkerPoolID, workerGroup: opts.WorkerGroup, workerID: opts.WorkerID,
		cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.Stop()
		if t.Failed() {
			t.Logf("hopper worker %s/%s logs:\n%s", opts.WorkerGroup, opts.WorkerID, w.Logs())
		}
	})
	return w
}
