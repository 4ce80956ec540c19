package worker

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/tcclient/tcclienttest"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

const testQueue = "test-prov/test-wt"

// TestMain lets the test binary double as a task command: with
// HOPPER_WORKER_TEST_HELPER set it performs that helper action instead of
// running tests, so tests need no curl or other tools.
func TestMain(m *testing.M) {
	if sandbox.IsInitInvocation() {
		// The worker's sandbox re-executes this binary as its init.
		os.Exit(sandbox.InitMain())
	}
	switch os.Getenv("HOPPER_WORKER_TEST_HELPER") {
	case "":
		os.Exit(m.Run())
	case "proxy-get":
		resp, err := http.Get(os.Getenv("TASKCLUSTER_PROXY_URL") + os.Getenv("HELPER_PATH"))
		if err != nil {
			fmt.Println("helper error:", err)
			os.Exit(2)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("proxy status %d\n%s\n", resp.StatusCode, body)
		if resp.StatusCode != 200 {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(3)
}

type bundle struct {
	fake  *tcclienttest.Server
	admin *tcclient.Client
	creds *tcclient.Credentials
	cfg   Config
}

type setupOpts struct {
	claimTimeout time.Duration
	mutate       func(*Config)
}

func setup(t *testing.T, opts setupOpts) *bundle {
	t.Helper()
	fake := tcclienttest.New(tcclienttest.Options{ClaimTimeout: opts.claimTimeout, LongPoll: 300 * time.Millisecond})
	t.Cleanup(fake.Close)
	creds := fake.AddClient("worker", "queue:claim-work:"+testQueue, "queue:worker-id:tg/tw")
	cfg := Config{
		RootURL:       fake.URL,
		Credentials:   CredentialsConfig{ClientID: creds.ClientID, AccessToken: creds.AccessToken},
		TaskQueueID:   testQueue,
		WorkerGroup:   "tg",
		WorkerID:      "tw",
		WorkDir:       t.TempDir(),
		ClaimInterval: Duration{50 * time.Millisecond},
		SandboxInit:   sandbox.SelfInit(),
	}
	if opts.mutate != nil {
		opts.mutate(&cfg)
	}
	return &bundle{fake: fake, admin: fake.Client(fake.AddClient("admin", "*")), creds: creds, cfg: cfg}
}

func (b *bundle) newWorker(t *testing.T) *Worker {
	t.Helper()
	w, err := New(b.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	w.reclaimRetryDelay = 50 * time.Millisecond
	w.queueRetryDelay = 5 * time.Millisecond
	return w
}

type taskOpts struct {
	scopes       []string
	dependencies []string
	expires      time.Duration
}

func (b *bundle) createTask(t *testing.T, pl any, o taskOpts) string {
	t.Helper()
	raw, err := json.Marshal(pl)
	require.NoError(t, err)
	now := time.Now()
	def := &tcclient.TaskDefinition{
		TaskQueueID:  testQueue,
		Created:      tcclient.NewTime(now),
		Deadline:     tcclient.NewTime(now.Add(time.Hour)),
		Scopes:       o.scopes,
		Dependencies: o.dependencies,
		Payload:      raw,
		Metadata:     tcclient.TaskMetadata{Name: "t", Description: "d", Owner: "o@example.com", Source: "https://example.com"},
	}
	if o.expires > 0 {
		def.Expires = tcclient.NewTime(now.Add(o.expires))
	}
	id := tcclient.NewTaskID()
	_, err = b.admin.CreateTask(context.Background(), id, def)
	require.NoError(t, err)
	return id
}

// runOne runs a worker until it has run n tasks and returns its exit code.
func (b *bundle) runN(t *testing.T, n int) int {
	t.Helper()
	b.cfg.NumberOfTasksToRun = n
	w := b.newWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code, err := w.Run(ctx)
	require.NoError(t, err)
	return code
}

func (b *bundle) status(t *testing.T, taskID string) tcclient.TaskStatus {
	t.Helper()
	st, ok := b.fake.Status(taskID)
	require.True(t, ok)
	return st
}

func (b *bundle) backingLog(t *testing.T, taskID string, runID int) string {
	t.Helper()
	a, ok := b.fake.Artifacts(taskID, runID)["public/logs/live_backing.log"]
	require.True(t, ok, "backing log missing")
	require.Equal(t, "gzip", a.ContentEncoding)
	require.Equal(t, "text/plain; charset=utf-8", a.ContentType)
	body, err := a.Body()
	require.NoError(t, err)
	return string(body)
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestTaskCompleted(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	id := b.createTask(t, map[string]any{
		"command": [][]string{
			sh(`echo "hello from $TASK_ID run $RUN_ID in $TASK_WORKDIR"; test "$PWD" = "$TASK_WORKDIR"`),
			sh(`mkdir -p out/sub && echo data > out/a.txt && echo '{}' > out/sub/b.json && printf '\x89PNG' > out/c.png && env > env.txt`),
			sh(`echo "custom=$CUSTOM root=$TASKCLUSTER_ROOT_URL group=$TASK_GROUP_ID"; printf 'no newline at end'`),
		},
		"env":        map[string]string{"CUSTOM": "value", "TASK_ID": "overridden?"},
		"maxRunTime": 30,
		"artifacts": []map[string]any{
			{"type": "file", "path": "out/a.txt", "name": "public/a.txt"},
			{"type": "directory", "path": "out", "name": "public/dir"},
			{"type": "file", "path": "env.txt", "name": "private/env.txt"},
		},
	}, taskOpts{})
	require.Equal(t, ExitOK, b.runN(t, 1))

	st := b.status(t, id)
	require.Equal(t, tcclient.StateCompleted, st.State)
	arts := b.fake.Artifacts(id, 0)
	require.Contains(t, arts, "public/a.txt")
	require.Equal(t, "text/plain; charset=utf-8", arts["public/a.txt"].ContentType)
	require.Equal(t, "gzip", arts["public/a.txt"].ContentEncoding)
	body, err := arts["public/a.txt"].Body()
	require.NoError(t, err)
	require.Equal(t, "data\n", string(body))
	require.Contains(t, arts, "public/dir/sub/b.json")
	require.Equal(t, "application/json", arts["public/dir/sub/b.json"].ContentType)
	require.Equal(t, "image/png", arts["public/dir/c.png"].ContentType)
	require.Empty(t, arts["public/dir/c.png"].ContentEncoding, "png is uploaded without gzip")

	env, err := arts["private/env.txt"].Body()
	require.NoError(t, err)
	require.NotContains(t, string(env), b.creds.AccessToken, "worker secret leaked into the task environment")
	require.Contains(t, string(env), "TASK_ID="+id+"\n", "TASK_ID is forced")
	require.Contains(t, string(env), "CUSTOM=value\n")

	// The live log ends up as a link to the backing log.
	require.Equal(t, tcclient.StorageLink, arts["public/logs/live.log"].StorageType)
	require.Equal(t, "public/logs/live_backing.log", arts["public/logs/live.log"].Artifact)

	log := b.backingLog(t, id, 0)
	for _, want := range []string{
		"Task ID: " + id, "=== Task Starting ===", `"workerId": "tw"`,
		"hello from " + id + " run 0 in ",
		"Executing command 0: sh -c ",
		"custom=value root=" + b.fake.URL + " group=" + id,
		"no newline at end\n[taskcluster ",
		"Exit Code: 0", "Result: SUCCEEDED", "=== Task Finished ===", "Task resolution: completed",
	} {
		require.Contains(t, log, want)
	}
	// The task directory is gone.
	entries, err := os.ReadDir(filepath.Join(b.cfg.WorkDir, "tasks"))
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestResolutions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		payload    map[string]any
		state      string
		reason     string
		logWants   []string
		errorArt   string
		faults     map[string][]int
		extraCheck func(t *testing.T, b *bundle, id string)
	}{
		{
			name:     "non-zero exit fails and stops",
			payload:  map[string]any{"command": [][]string{sh("echo one; exit 3"), sh("echo never")}, "maxRunTime": 10},
			state:    tcclient.StateFailed,
			logWants: []string{"Exit Code: 3", "Result: FAILED", "Command 0 exited with code 3."},
			extraCheck: func(t *testing.T, b *bundle, id string) {
				require.NotContains(t, b.backingLog(t, id, 0), "never")
			},
		},
		{
			name:     "command not found fails",
			payload:  map[string]any{"command": [][]string{{"/nonexistent/binary"}}, "maxRunTime": 10},
			state:    tcclient.StateFailed,
			logWants: []string{"Could not start command 0"},
		},
		{
			name: "schema violation is malformed-payload",
			payload: map[string]any{"command": []string{"echo hi"}, "maxRunTime": "ten",
				"bogus": true},
			state:  tcclient.StateException,
			reason: tcclient.ReasonMalformedPayload,
			logWants: []string{
				"[taskcluster:error]   - payload.command[0]: got string, want array",
				"[taskcluster:error]   - payload.maxRunTime: got string, want integer",
				"[taskcluster:error]   - payload: additional properties 'bogus' not allowed",
			},
		},
		{
			name:     "maxRunTime above the worker maximum",
			payload:  map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 100000},
			state:    tcclient.StateException,
			reason:   tcclient.ReasonMalformedPayload,
			logWants: []string{"payload.maxRunTime 100000 exceeds this worker pool's maximum of 86400 seconds"},
		},
		{
			name:     "unsupported decompression format",
			payload:  map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 5, "mounts": []any{map[string]any{"file": "f", "format": "xz", "content": map[string]any{"raw": "x"}}}},
			state:    tcclient.StateException,
			reason:   tcclient.ReasonMalformedPayload,
			logWants: []string{`decompression format "xz" is not supported by this worker`},
		},
		{
			name:     "cache without scope",
			payload:  map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 5, "mounts": []any{map[string]any{"directory": "c", "cacheName": "npm"}}},
			state:    tcclient.StateException,
			reason:   tcclient.ReasonMalformedPayload,
			logWants: []string{"requires scope generic-worker:cache:npm"},
		},
		{
			name: "retry exit code is intermittent-task",
			payload: map[string]any{"command": [][]string{sh("exit 36")}, "maxRunTime": 10,
				"onExitStatus": map[string]any{"retry": []int{36}}},
			state:    tcclient.StatePending, // the queue added a retry run
			reason:   tcclient.ReasonIntermittentTask,
			logWants: []string{"listed in onExitStatus.retry"},
		},
		{
			name: "missing artifact uploads an error artifact and fails",
			payload: map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 10,
				"artifacts": []any{
					map[string]any{"type": "file", "path": "missing.txt", "name": "public/missing.txt"},
					map[string]any{"type": "file", "path": "also-missing.txt", "optional": true},
				}},
			state:    tcclient.StateFailed,
			errorArt: "public/missing.txt",
			logWants: []string{"Could not read file missing.txt"},
			extraCheck: func(t *testing.T, b *bundle, id string) {
				require.NotContains(t, b.fake.Artifacts(id, 0), "also-missing.txt")
			},
		},
		{
			name: "directory given as file artifact",
			payload: map[string]any{"command": [][]string{sh("mkdir d")}, "maxRunTime": 10,
				"artifacts": []any{map[string]any{"type": "file", "path": "d", "name": "public/d"}}},
			state:    tcclient.StateFailed,
			errorArt: "public/d",
		},
		{
			name: "createArtifact 5xx after retries is resource-unavailable",
			payload: map[string]any{"command": [][]string{sh("echo x > a.txt")}, "maxRunTime": 10,
				"features":  map[string]any{"liveLog": false},
				"artifacts": []any{map[string]any{"type": "file", "path": "a.txt"}}},
			faults:   map[string][]int{"createArtifact": {500, 500, 500, 500, 500, 500}},
			state:    tcclient.StateException,
			reason:   tcclient.ReasonResourceUnavailable,
			logWants: []string{"Artifact upload failed after retries"},
		},
		{
			name: "S3 PUT failure after retries is resource-unavailable",
			payload: map[string]any{"command": [][]string{sh("echo x > a.txt")}, "maxRunTime": 10,
				"features":  map[string]any{"liveLog": false},
				"artifacts": []any{map[string]any{"type": "file", "path": "a.txt"}}},
			faults: map[string][]int{"putBlob": {503, 503, 503, 503, 503, 503}},
			state:  tcclient.StateException,
			reason: tcclient.ReasonResourceUnavailable,
		},
		{
			name: "createArtifact conflict is malformed-payload",
			payload: map[string]any{"command": [][]string{sh("echo x > a.txt")}, "maxRunTime": 10,
				"features":  map[string]any{"liveLog": false},
				"artifacts": []any{map[string]any{"type": "file", "path": "a.txt"}}},
			faults: map[string][]int{"createArtifact": {409}},
			state:  tcclient.StateException,
			reason: tcclient.ReasonMalformedPayload,
		},
		{
			name: "artifact expiring before the deadline is malformed-payload",
			payload: map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 10,
				"artifacts": []any{map[string]any{"type": "file", "path": "a.txt",
					"expires": time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}}},
			state:    tcclient.StateException,
			reason:   tcclient.ReasonMalformedPayload,
			logWants: []string{"is before the task deadline"},
		},
		{
			name: "mount from a task that is not a dependency is malformed-payload",
			payload: map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 10,
				"mounts": []any{map[string]any{"file": "f", "content": map[string]any{"taskId": "fcjV2WLLQSmoxdyPlPVtag", "artifact": "public/x"}}}},
			state:    tcclient.StateException,
			reason:   tcclient.ReasonMalformedPayload,
			logWants: []string{"must be listed in task.dependencies"},
		},
		{
			name: "maxRunTime kills the process group and fails",
			payload: map[string]any{"command": [][]string{sh("echo started; sleep 30; echo never")}, "maxRunTime": 1,
				"onExitStatus": map[string]any{"purgeCaches": []int{}}},
			state:    tcclient.StateFailed,
			logWants: []string{"max run time exceeded", "Result: ABORTED (maxRunTime exceeded)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			for name, statuses := range tt.faults {
				b.fake.InjectFault(name, statuses...)
			}
			id := b.createTask(t, tt.payload, taskOpts{})
			start := time.Now()
			require.Equal(t, ExitOK, b.runN(t, 1))
			require.Less(t, time.Since(start), 15*time.Second)
			st := b.status(t, id)
			require.Equal(t, tt.state, st.State)
			if tt.reason != "" {
				require.Equal(t, tt.reason, st.Runs[0].ReasonResolved)
			}
			log := b.backingLog(t, id, 0)
			for _, w := range tt.logWants {
				require.Contains(t, log, w)
			}
			if tt.errorArt != "" {
				a := b.fake.Artifacts(id, 0)[tt.errorArt]
				require.NotNil(t, a)
				require.Equal(t, tcclient.StorageError, a.StorageType)
			}
			if tt.extraCheck != nil {
				tt.extraCheck(t, b, id)
			}
		})
	}
}

func TestReclaimUnauthorizedAbandonsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{claimTimeout: 2 * time.Second})
	b.fake.InjectFault("reclaimTask", 401)
	id := b.createTask(t, map[string]any{"command": [][]string{sh("sleep 30")}, "maxRunTime": 60}, taskOpts{})
	start := time.Now()
	require.Equal(t, ExitOK, b.runN(t, 1))
	require.Less(t, time.Since(start), 6*time.Second)
	// No report (the log is offered to the queue, which decides).
	for _, r := range b.fake.Requests() {
		require.NotContains(t, r.Path, "/completed")
		require.NotContains(t, r.Path, "/failed")
		require.NotContains(t, r.Path, "/exception")
	}
	// The queue still shows the run as running; its claim will expire.
	require.Equal(t, tcclient.StateRunning, b.status(t, id).State)
}

func TestReclaimRefreshesCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{claimTimeout: 2 * time.Second})
	// One transient reclaim failure is retried, not fatal.
	b.fake.InjectFault("reclaimTask", 503)
	id := b.createTask(t, map[string]any{"command": [][]string{sh("sleep 3.5")}, "maxRunTime": 30}, taskOpts{})
	require.Equal(t, ExitOK, b.runN(t, 1))
	require.Equal(t, tcclient.StateCompleted, b.status(t, id).State)
	var reclaims []string
	var completedBy string
	for _, r := range b.fake.Requests() {
		if strings.HasSuffix(r.Path, "/reclaim") && r.Status == 200 {
			reclaims = append(reclaims, r.ClientID)
		}
		if strings.HasSuffix(r.Path, "/completed") {
			completedBy = r.ClientID
		}
	}
	require.GreaterOrEqual(t, len(reclaims), 2)
	// Each reclaim is signed with the credentials of the previous one, and
	// the resolution with the newest: the client ids embed takenUntil.
	require.NotEqual(t, reclaims[0], reclaims[len(reclaims)-1])
	require.True(t, strings.HasPrefix(completedBy, "task-client/"+id+"/0/on/tg/tw/until/"))
	require.NotEqual(t, reclaims[0], completedBy)
}

func TestProxySignsWithTaskCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	other := b.createTask(t, map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 1}, taskOpts{})
	// Make the other task not claimable by this worker run: claim it away.
	b.fake.Cancel(other)
	self, err := os.Executable()
	require.NoError(t, err)
	id := b.createTask(t, map[string]any{
		"command":    [][]string{{self}},
		"env":        map[string]string{"HOPPER_WORKER_TEST_HELPER": "proxy-get", "HELPER_PATH": "/api/queue/v1/task/" + other},
		"maxRunTime": 30,
		"features":   map[string]any{"taskclusterProxy": true},
	}, taskOpts{scopes: []string{"queue:get-task:" + other}})
	require.Equal(t, ExitOK, b.runN(t, 1))
	require.Equal(t, tcclient.StateCompleted, b.status(t, id).State, b.backingLog(t, id, 0))
	require.Contains(t, b.backingLog(t, id, 0), "proxy status 200")
	var found bool
	for _, r := range b.fake.Requests() {
		if r.Path == "/api/queue/v1/task/"+other && r.ClientID != "admin" {
			found = true
			require.True(t, strings.HasPrefix(r.ClientID, "task-client/"+id+"/0/"), r.ClientID)
			require.Equal(t, []string{"queue:get-task:" + other, "queue:create-artifact:" + id + "/0"}, r.AuthorizedScopes)
			require.True(t, r.HasCertificate)
		}
	}
	require.True(t, found, "no proxied request reached the queue")
}

func TestImmediateShutdownReportsWorkerShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// The command marks that it runs, so the shutdown stops a command,
	// not a run still being prepared.
	mark := filepath.Join(t.TempDir(), "started")
	require.NoError(t, os.Chmod(filepath.Dir(mark), 0o777))
	id := b.createTask(t, map[string]any{"command": [][]string{sh(`echo started; : > "$MARK"; sleep 60`)},
		"env": map[string]string{"MARK": mark}, "maxRunTime": 120}, taskOpts{})
	w := b.newWorker(t)
	done := make(chan int, 1)
	go func() {
		code, _ := w.Run(context.Background())
		done <- code
	}()
	testclock.WaitFor(t, time.Minute, "the command to start", func() bool {
		_, err := os.Stat(mark)
		return err == nil
	})
	w.Shutdown(true)
	select {
	case code := <-done:
		require.Equal(t, ExitShutdown, code)
	case <-time.After(15 * time.Second):
		t.Fatal("worker did not shut down")
	}
	st := b.status(t, id)
	require.Equal(t, tcclient.ReasonWorkerShutdown, st.Runs[0].ReasonResolved)
	require.Equal(t, tcclient.StatePending, st.State, "worker-shutdown is retried")
	require.Contains(t, b.backingLog(t, id, 0), "Worker is shutting down")
}

func TestGracefulShutdownDrains(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	id := b.createTask(t, map[string]any{"command": [][]string{sh("sleep 1")}, "maxRunTime": 30}, taskOpts{})
	w := b.newWorker(t)
	done := make(chan int, 1)
	go func() {
		code, _ := w.Run(context.Background())
		done <- code
	}()
	require.Eventually(t, func() bool {
		st, _ := b.fake.Status(id)
		return st.State == tcclient.StateRunning
	}, 10*time.Second, 20*time.Millisecond)
	w.Shutdown(false)
	// A task created now is not claimed any more.
	late := b.createTask(t, map[string]any{"command": [][]string{sh("true")}, "maxRunTime": 30}, taskOpts{})
	select {
	case code := <-done:
		require.Equal(t, ExitDrained, code)
	case <-time.After(15 * time.Second):
		t.Fatal("worker did not drain")
	}
	require.Equal(t, tcclient.StateCompleted, b.status(t, id).State)
	require.Equal(t, tcclient.StatePending, b.status(t, late).State)
}

func TestMountsAndCaches(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("unzipped content\n"))
	require.NoError(t, zw.Close())
	var hits int
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path == "/flaky" && hits == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = w.Write(gz.Bytes())
	}))
	defer files.Close()
	sum := fileSHA256Bytes(gz.Bytes())
	pl := map[string]any{
		"command": [][]string{sh(`cat raw.txt b64.txt url.txt && test -d cache && cat cache/seen 2>/dev/null; echo "run $RUN_ID" >> cache/seen`)},
		"mounts": []any{
			map[string]any{"file": "raw.txt", "content": map[string]any{"raw": "raw content\n"}},
			map[string]any{"file": "b64.txt", "content": map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte("decoded base64\n"))}},
			map[string]any{"file": "url.txt", "format": "gz", "content": map[string]any{"url": files.URL + "/flaky", "sha256": sum}},
			map[string]any{"directory": "cache", "cacheName": "shared"},
		},
		"maxRunTime": 30,
	}
	first := b.createTask(t, pl, taskOpts{scopes: []string{"generic-worker:cache:*"}})
	second := b.createTask(t, pl, taskOpts{scopes: []string{"generic-worker:cache:shared"}})
	require.Equal(t, ExitOK, b.runN(t, 2))
	for _, id := range []string{first, second} {
		require.Equal(t, tcclient.StateCompleted, b.status(t, id).State, b.backingLog(t, id, 0))
		log := b.backingLog(t, id, 0)
		require.Contains(t, log, "raw content\ndecoded base64\nunzipped content\n")
	}
	// The cache survived from the first run into the second.
	require.Contains(t, b.backingLog(t, second, 0), "run 0\n")
	require.Contains(t, b.backingLog(t, second, 0), "Reusing writable cache \"shared\"")

	// A wrong sha256 is malformed-payload.
	bad := b.createTask(t, map[string]any{
		"command":    [][]string{sh("true")},
		"mounts":     []any{map[string]any{"file": "x", "content": map[string]any{"url": files.URL + "/x", "sha256": strings.Repeat("0", 64)}}},
		"maxRunTime": 30,
	}, taskOpts{})
	require.Equal(t, ExitOK, b.runN(t, 1))
	st := b.status(t, bad)
	require.Equal(t, tcclient.ReasonMalformedPayload, st.Runs[0].ReasonResolved)
	require.Contains(t, b.backingLog(t, bad, 0), "but the payload requires 0000")
}

func fileSHA256Bytes(data []byte) string {
	f, _ := os.CreateTemp("", "sha")
	defer os.Remove(f.Name())
	_, _ = f.Write(data)
	f.Close()
	s, _ := fileSHA256(f.Name())
	return s
}

func TestLiveLogStreamsWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	id := b.createTask(t, map[string]any{
		"command":    [][]string{sh(`echo live-marker; for i in 1 2 3 4 5 6 7 8 9 10; do test -e "$STOP" && exit 0; sleep 0.5; done; exit 1`)},
		"env":        map[string]string{"STOP": filepath.Join(t.TempDir(), "stop")},
		"maxRunTime": 30,
	}, taskOpts{})
	b.cfg.NumberOfTasksToRun = 1
	w := b.newWorker(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.Run(context.Background())
	}()
	defer func() { <-done }()
	var url string
	require.Eventually(t, func() bool {
		a := b.fake.Artifacts(id, 0)["public/logs/live.log"]
		if a == nil || a.StorageType != tcclient.StorageReference {
			return false
		}
		url = a.URL
		return true
	}, 10*time.Second, 20*time.Millisecond)
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	buf := make([]byte, 0, 4096)
	deadline := time.Now().Add(10 * time.Second)
	for !bytes.Contains(buf, []byte("live-marker\n")) && time.Now().Before(deadline) {
		chunk := make([]byte, 1024)
		n, err := resp.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			break
		}
	}
	require.Contains(t, string(buf), "live-marker", "live log did not stream output of the running command")
	st, _ := b.fake.Status(id)
	require.Equal(t, tcclient.StateRunning, st.State, "the output arrived while the task was still running")
	var pl struct {
		Env map[string]string `json:"env"`
	}
	def, err := b.admin.Task(context.Background(), id)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(def.Payload, &pl))
	require.NoError(t, os.WriteFile(pl.Env["STOP"], nil, 0o644))
	require.Eventually(t, func() bool { return b.status(t, id).State == tcclient.StateCompleted }, 15*time.Second, 50*time.Millisecond)
}

func TestCapacityRunsTasksConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{mutate: func(c *Config) { c.Capacity = 3 }})
	marker := t.TempDir()
	var ids []string
	for i := range 3 {
		// Each task waits until all three are running at once.
		ids = append(ids, b.createTask(t, map[string]any{
			"command":    [][]string{sh(fmt.Sprintf(`touch "%s/%d"; for i in $(seq 1 100); do [ $(ls "%s" | wc -l) -ge 3 ] && exit 0; sleep 0.05; done; exit 1`, marker, i, marker))},
			"maxRunTime": 30,
		}, taskOpts{}))
	}
	require.Equal(t, ExitOK, b.runN(t, 3))
	for _, id := range ids {
		require.Equal(t, tcclient.StateCompleted, b.status(t, id).State, b.backingLog(t, id, 0))
	}
	// All three came from claimWork calls asking for the free capacity.
	var claimCalls int
	for _, r := range b.fake.Requests() {
		if strings.HasPrefix(r.Path, "/api/queue/v1/claim-work/") {
			claimCalls++
		}
	}
	require.LessOrEqual(t, claimCalls, 3)
}
