package e2e_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestWorkerRunnerGuide runs docs/worker-pools.md's worker-runner machine
// as written, with Taskcluster's own start-worker, generic-worker and
// livelog (HOPPER_TEST_WORKER_RUNNER names a directory holding the three,
// default ~/.cache/hopper-test/taskcluster-workers, built from a
// Taskcluster release; generic-worker with -tags insecure, so that tasks
// run as the test's user): the guide's pool, role and worker
// are created, start-worker registers with the secret and starts
// generic-worker with the config it writes, and a task on the pool runs
// with its live log.
func TestWorkerRunnerGuide(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	bins := taskclusterWorkers(t, "start-worker", "generic-worker", "livelog")
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gw-pool.yml"), []byte(e2e.DocExample(t, "worker-pools-gw-pool").Text), 0o600))
	out, err := e2e.DocShell{Dir: dir, Env: srv.Env()}.Run(t, e2e.DocExample(t, "worker-pools-gw-setup"))
	require.NoError(t, err, out)
	secret, err := os.ReadFile(filepath.Join(dir, "gw-1.secret"))
	require.NoError(t, err)

	machine := t.TempDir()
	key := filepath.Join(machine, "ed25519.key")
	out2, err := exec.Command(filepath.Join(bins, "generic-worker"), "new-ed25519-keypair", "--file", key).CombinedOutput()
	require.NoError(t, err, string(out2))
	runnerFile := filepath.Join(machine, "start-worker.yml")
	require.NoError(t, os.WriteFile(runnerFile, []byte(e2e.DocExample(t, "worker-pools-start-worker").Replace(t,
		"https://hopper.example.com", srv.RootURL,
		"<the secret>", strings.TrimSpace(string(secret)),
		"/usr/local/bin/generic-worker", filepath.Join(bins, "generic-worker"),
		"/etc/generic-worker.json", filepath.Join(machine, "generic-worker.json"),
		"/etc/generic-worker/ed25519.key", key,
		"/usr/local/bin/livelog", filepath.Join(bins, "livelog"),
		"/var/lib/generic-worker", machine)+
		// Not the default ports (60098-60099), which another test
		// machine's generic-worker may hold.
		"  livelogPortBase: "+strconv.Itoa(freePortPair(t))+"\n"), 0o600))
	runner := exec.Command(filepath.Join(bins, "start-worker"), runnerFile)
	runner.Dir = machine
	logs := &e2e.SyncBuffer{}
	runner.Stdout, runner.Stderr = logs, logs
	runner.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, runner.Start())
	done := make(chan struct{})
	go func() { _ = runner.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-runner.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("start-worker and generic-worker output:\n%s", logs.String())
		}
	})

	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	id := tcclient.NewTaskID()
	payload, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", "echo hello from generic-worker"}}, "maxRunTime": 60})
	require.NoError(t, err)
	now := time.Now()
	_, err = q.CreateTask(ctx, id, &tcclient.TaskDefinition{TaskQueueID: "proj/gw", Created: tcclient.NewTime(now),
		Deadline: tcclient.NewTime(now.Add(time.Hour)), Payload: payload,
		Metadata: tcclient.TaskMetadata{Name: "gw", Description: "worker-runner guide", Owner: "e2e@example.com", Source: "https://example.com"}})
	require.NoError(t, err)
	testclock.WaitFor(t, 3*time.Minute, "the task to complete on generic-worker", func() bool {
		select {
		case <-done:
			t.Fatalf("start-worker exited:\n%s", logs.String())
		default:
		}
		st, err := q.Status(ctx, id)
		return err == nil && st.State == tcclient.StateCompleted
	})
	st, err := q.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "gw-1", st.Runs[0].WorkerID)
	// generic-worker streams the log through livelog (live.log) and then
	// points live.log at the uploaded live_backing.log.
	testclock.WaitFor(t, time.Minute, "the run's live.log and live_backing.log", func() bool {
		arts, err := q.AllArtifacts(ctx, id, 0)
		require.NoError(t, err)
		names := map[string]bool{}
		for _, a := range arts {
			names[a.Name] = true
		}
		return names["public/logs/live.log"] && names["public/logs/live_backing.log"]
	})
	require.Contains(t, logs.String(), "livelog", "generic-worker ran the guide's livelog")
}

// freePortPair returns a port p such that p and p+1 were free just now.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 100 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		_ = a.Close()
		if err == nil {
			_ = b.Close()
			return p
		}
	}
	t.Fatal("no two free ports in a row")
	return 0
}

// taskclusterWorkers is the directory holding Taskcluster's own worker
// programs (HOPPER_TEST_WORKER_RUNNER, default
// ~/.cache/hopper-test/taskcluster-workers; generic-worker built with
// -tags insecure, so that tasks run as the test's user); the test skips,
// naming what is missing, unless every one of names is there.
func taskclusterWorkers(t *testing.T, names ...string) string {
	t.Helper()
	bins := os.Getenv("HOPPER_TEST_WORKER_RUNNER")
	if home, err := os.UserHomeDir(); bins == "" && err == nil {
		bins = filepath.Join(home, ".cache", "hopper-test", "taskcluster-workers")
	}
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(bins, b)); bins == "" || err != nil {
			t.Skipf("no Taskcluster %s in %s (HOPPER_TEST_WORKER_RUNNER; generic-worker built with -tags insecure): %s missing",
				strings.Join(names, ", "), bins, b)
		}
	}
	return bins
}
