package devmode_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/devmode"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestRootToken: the token is generated once into the data dir, kept
// private, and read back; HOPPER_ROOT_ACCESS_TOKEN wins over it.
func TestRootToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	t.Setenv("HOPPER_ROOT_ACCESS_TOKEN", "")
	first, err := devmode.RootToken(dir)
	require.NoError(t, err)
	require.Regexp(t, `^[A-Za-z0-9_-]{22,66}$`, first)
	info, err := os.Stat(filepath.Join(dir, "root-access-token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	again, err := devmode.RootToken(dir)
	require.NoError(t, err)
	require.Equal(t, first, again, "a second call reads the kept token")

	t.Setenv("HOPPER_ROOT_ACCESS_TOKEN", "from-the-environment-0123456789")
	env, err := devmode.RootToken(dir)
	require.NoError(t, err)
	require.Equal(t, "from-the-environment-0123456789", env)
}

// TestRunQueueAndWorker: one Run serves the queue and runs a worker that
// takes a task to completion with a real child process; cancelling stops
// both and Run returns nil.
func TestRunQueueAndWorker(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("needs /bin/sh for the task's command")
	}
	t.Setenv("HOPPER_ROOT_ACCESS_TOKEN", "")
	dir := t.TempDir()
	removeWorkerDir(t, dir)
	const queueID = "devmode-test/local"
	var out, logs e2e.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- devmode.Run(ctx, devmode.Options{
			Server:      server.Config{Listen: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
			TaskQueueID: queueID, Capacity: 1, Out: &out,
		})
	}()
	banner := regexp.MustCompile(`export TASKCLUSTER_ROOT_URL=(\S+) TASKCLUSTER_CLIENT_ID=(\S+) TASKCLUSTER_ACCESS_TOKEN=(\S+)`)
	var m []string
	require.Eventually(t, func() bool {
		m = banner.FindStringSubmatch(out.String())
		return m != nil
	}, 30*time.Second, 20*time.Millisecond, "the banner with the credentials")
	require.Equal(t, server.RootClientID, m[2])
	token, err := devmode.RootToken(dir)
	require.NoError(t, err)
	require.Equal(t, token, m[3], "the banner shows the token kept in the data dir")

	q := &tcclient.Client{RootURL: m[1], Credentials: &tcclient.Credentials{ClientID: m[2], AccessToken: m[3]}}
	taskID := tcclient.NewTaskID()
	now := time.Now()
	_, err = q.CreateTask(ctx, taskID, &tcclient.TaskDefinition{
		TaskQueueID: queueID, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload:  json.RawMessage(`{"command": [["/bin/sh", "-c", "echo devmode"]], "maxRunTime": 60}`),
		Metadata: tcclient.TaskMetadata{Name: "devmode test", Description: "d", Owner: "dev@example.com", Source: "https://example.com/dev"},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := q.Status(ctx, taskID)
		return err == nil && st.State == tcclient.StateCompleted
	}, 60*time.Second, 100*time.Millisecond, "the built-in worker completes the task")
	st, err := q.Status(ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, "dev", st.Runs[0].WorkerGroup)

	// The private data dir does not cost the sandbox its task users: no
	// complaint about it at start or in the task's log, and the engine is
	// not called insecure beside its sandbox.
	art, err := q.GetLatestArtifact(ctx, taskID, "public/logs/live_backing.log")
	require.NoError(t, err)
	resp, err := http.Get(art.URL)
	require.NoError(t, err)
	taskLog, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	require.Contains(t, string(taskLog), "devmode")
	require.Contains(t, string(taskLog), `"engine": "process (sandboxed)"`)
	for _, text := range []string{string(taskLog), logs.String(), out.String()} {
		require.NotContains(t, text, "not searchable by other users")
		require.NotContains(t, text, "insecure")
	}
	require.Contains(t, out.String(), "work dir ")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("devmode.Run did not return after cancellation")
	}
	require.Contains(t, out.String(), "stopping…")
}

// removeWorkerDir removes, after the test, the worker's directory that
// hopper dev on dataDir makes outside it when run as root.
func removeWorkerDir(t *testing.T, dataDir string) {
	t.Helper()
	dir, err := devmode.WorkerDir(dataDir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
}
