package workere2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// workerOpts tune startWorkerWith beyond startWorker's fixed settings.
type workerOpts struct {
	// id is the workerId (workers sharing a queue need distinct ids).
	id string
	// tasks stops the worker after that many runs (0 = no limit).
	tasks int
	// config holds further top-level keys of the worker's config file.
	config map[string]any
	// server is the queue to serve (nil: the shared one).
	server *env
}

// startWorkerWith starts `hopper worker` for queue with the root client's
// credentials, configured through a JSON file so that test-only settings
// (the 200 ms claim interval) need no flags. The worker is killed when the
// test ends if it is still running.
func startWorkerWith(t *testing.T, queue string, o workerOpts) *worker {
	t.Helper()
	srv := o.server
	if srv == nil {
		srv = shared
	}
	dir := reachableDir(t)
	return launchWorker(t, dir, workerConfig(srv, queue, dir, o))
}

// workerConfig is the config file of a worker for queue on srv working
// under dir, with o.config's keys laid over the fixed settings.
func workerConfig(srv *env, queue, dir string, o workerOpts) map[string]any {
	cfg := map[string]any{
		"rootUrl":            srv.rootURL,
		"credentials":        map[string]string{"clientId": rootClientID, "accessToken": srv.token},
		"taskQueueId":        queue,
		"workerGroup":        "e2e",
		"workerId":           o.id,
		"workDir":            filepath.Join(dir, "work"),
		"claimInterval":      "200ms",
		"numberOfTasksToRun": o.tasks,
	}
	for k, v := range o.config {
		cfg[k] = v
	}
	return cfg
}

// launchWorker writes cfg to dir/worker.json and starts `hopper worker` on
// it, with env added to this process's environment. The worker is killed
// when the test ends if it is still running.
func launchWorker(t testing.TB, dir string, cfg map[string]any, env ...string) *worker {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(dir, "worker.json")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	cmd := exec.Command(shared.bin, "worker", "--config", path, "--log-level", "warn")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	w := &worker{cmd: cmd, done: make(chan struct{}), configFile: path}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = cmd.Process.Kill()
			<-w.done
		}
	})
	return w
}

// createTaskWith creates a task on queue with payload pl; edit may set
// further fields of the definition (scopes, retries, task group).
func createTaskWith(t *testing.T, queue string, pl any, edit func(*tcclient.TaskDefinition)) string {
	t.Helper()
	return createTaskOn(t, shared, queue, pl, edit)
}

// createTaskOn is createTaskWith on the queue server srv.
func createTaskOn(t testing.TB, srv *env, queue string, pl any, edit func(*tcclient.TaskDefinition)) string {
	t.Helper()
	raw, err := json.Marshal(pl)
	require.NoError(t, err)
	now := time.Now()
	def := &tcclient.TaskDefinition{
		TaskQueueID: queue,
		Created:     tcclient.NewTime(now),
		Deadline:    tcclient.NewTime(now.Add(time.Hour)),
		Payload:     raw,
		Metadata:    tcclient.TaskMetadata{Name: "e2e", Description: "worker e2e", Owner: "e2e@example.com", Source: "https://example.com/e2e"},
	}
	if edit != nil {
		edit(def)
	}
	id := tcclient.NewTaskID()
	_, err = srv.admin.CreateTask(context.Background(), id, def)
	require.NoError(t, err)
	return id
}

// fetched is an artifact's body as stored, with the headers it was served
// with.
type fetched struct {
	header http.Header
	// body is the content after undoing any Content-Encoding: gzip.
	body string
}

// fetchArtifact follows the queue's redirect for the artifact of run runID
// (runID < 0: the latest run) and returns its body and headers.
func fetchArtifact(t *testing.T, taskID string, runID int, name string) fetched {
	t.Helper()
	ctx := context.Background()
	var (
		red *tcclient.ArtifactRedirect
		err error
	)
	if runID < 0 {
		red, err = shared.admin.GetLatestArtifact(ctx, taskID, name)
	} else {
		red, err = shared.admin.GetArtifact(ctx, taskID, runID, name)
	}
	require.NoError(t, err)
	// No transparent decompression: the test must see the Content-Encoding
	// the artifact was stored with.
	raw := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: true}}
	resp, err := raw.Get(red.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "fetching %s of %s", name, taskID)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err, "%s claims gzip encoding", name)
		body, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	return fetched{header: resp.Header, body: string(body)}
}

// backingLog returns the backing log of run runID (< 0: latest run),
// checking that it is stored gzip-encoded plain text as docs/contract/worker.md §3 says.
func backingLog(t *testing.T, taskID string, runID int) string {
	t.Helper()
	f := fetchArtifact(t, taskID, runID, "public/logs/live_backing.log")
	require.Equal(t, "gzip", f.header.Get("Content-Encoding"), "the backing log is uploaded gzip-encoded")
	require.True(t, strings.HasPrefix(f.header.Get("Content-Type"), "text/plain"), "content type %q", f.header.Get("Content-Type"))
	return f.body
}

// artifactsByName lists every artifact of a run, keyed by name.
func artifactsByName(t *testing.T, taskID string, runID int) map[string]tcclient.Artifact {
	t.Helper()
	list, err := shared.admin.AllArtifacts(context.Background(), taskID, runID)
	require.NoError(t, err)
	out := make(map[string]tcclient.Artifact, len(list))
	for _, a := range list {
		out[a.Name] = a
	}
	return out
}

// reachableDir returns a new temporary directory that other users may
// pass through (t.TempDir's are private to the user running the tests),
// so that a root worker's task users can reach their task directories.
func reachableDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// heartbeatDir returns a directory every task user may write heartbeat
// files to. Tasks write heartbeats rather than PIDs: PIDs inside the
// sandbox's PID namespace mean nothing outside it.
func heartbeatDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(reachableDir(t), "hb")
	require.NoError(t, os.Mkdir(dir, 0o777))
	require.NoError(t, os.Chmod(dir, 0o777))
	return dir
}

// heartbeat is a shell loop appending to $HB/<name> every 50 ms, through
// a descriptor on which it holds the file's lock: the lock is held while
// the loop's process (or any child that inherited the descriptor, such
// as a daemon it left behind) lives, and freed by the kernel when the
// last of them ends, so tests ask whether it still runs without watching
// the clock (alive).
func heartbeat(name string) string {
	return `exec 9>>"$HB/` + name + `"; flock 9; while :; do echo beat >&9; sleep 0.05; done`
}

// awaitBeats is a shell loop that returns once each named heartbeat has
// beaten, so holds its lock.
func awaitBeats(names ...string) string {
	var cond []string
	for _, n := range names {
		cond = append(cond, `[ -s "$HB/`+n+`" ]`)
	}
	return `until ` + strings.Join(cond, " && ") + `; do sleep 0.01; done`
}

// alive reports, for each heartbeat file, whether a process still holds
// its lock: false for a file not (yet) created, or whose processes all
// ended.
func alive(files ...string) []bool {
	out := make([]bool, len(files))
	for i, f := range files {
		fd, err := os.Open(f)
		if err != nil {
			continue
		}
		err = syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		out[i] = errors.Is(err, syscall.EWOULDBLOCK)
		fd.Close() // frees the lock if this look took it
	}
	return out
}

// waitAlive waits until every heartbeat's processes run (want true) or
// have all ended (want false).
func waitAlive(t *testing.T, want bool, what string, files ...string) {
	t.Helper()
	testclock.WaitFor(t, 2*time.Minute, what, func() bool { return !slices.Contains(alive(files...), !want) })
}

// waitLiveLog waits until the task's live log holds text: the running
// task's output has reached its worker.
func waitLiveLog(t *testing.T, taskID, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var red *tcclient.ArtifactRedirect
	testclock.WaitFor(t, 2*time.Minute, "the live log of "+taskID, func() bool {
		var err error
		red, err = shared.admin.GetLatestArtifact(ctx, taskID, "public/logs/live.log")
		return err == nil
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, red.URL, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), text) {
		n, err := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil && !strings.Contains(string(got), text) {
			t.Fatalf("the live log of %s ended (%v) without %q:\n%s", taskID, err, text, got)
		}
	}
}
