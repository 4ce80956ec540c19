package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/ui"
)

// TestServedByHopperServe runs the real binary: the UI is mounted, the root
// URL sends browsers to it, and API clients still get Taskcluster's JSON
// 404 there.
func TestServedByHopperServe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips building and running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(t *testing.T, path, accept string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.RootURL+path, nil)
		require.NoError(t, err)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := noFollow.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(body)
	}
	const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

	t.Run("page", func(t *testing.T) {
		res, body := get(t, "/ui/", browserAccept)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
		require.Equal(t, ui.ContentSecurityPolicy, res.Header.Get("Content-Security-Policy"))
		require.Contains(t, body, `<script src="app.js" defer></script>`)
	})
	t.Run("script", func(t *testing.T) {
		res, _ := get(t, "/ui/app.js", "")
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "text/javascript; charset=utf-8", res.Header.Get("Content-Type"))
	})
	t.Run("without slash", func(t *testing.T) {
		res, _ := get(t, "/ui", browserAccept)
		require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}, res.StatusCode)
		require.Equal(t, "/ui/", res.Header.Get("Location"))
	})
	t.Run("taskcluster signin's page", func(t *testing.T) {
		res, _ := get(t, "/auth/clients/create?scope=%2A&name=cli-x&expires=1d&callback_url=http%3A%2F%2Flocalhost%3A5000", browserAccept)
		require.Equal(t, http.StatusFound, res.StatusCode)
		require.Equal(t, "/ui/#/auth/clients/create?scope=%2A&name=cli-x&expires=1d&callback_url=http%3A%2F%2Flocalhost%3A5000", res.Header.Get("Location"))
	})
	t.Run("root for browsers", func(t *testing.T) {
		res, _ := get(t, "/", browserAccept)
		require.Equal(t, http.StatusFound, res.StatusCode)
		require.Equal(t, "/ui/", res.Header.Get("Location"))
	})
	for _, accept := range []string{"", "application/json", "*/*"} {
		t.Run("root for API clients "+accept, func(t *testing.T) {
			res, body := get(t, "/", accept)
			require.Equal(t, http.StatusNotFound, res.StatusCode)
			require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "application/json"))
			require.JSONEq(t, `{"error":"Not found"}`, body)
		})
	}
	t.Run("anonymous can list a queue's pending and claimed tasks", func(t *testing.T) {
		for _, list := range []string{"pending", "claimed"} {
			res, body := get(t, "/api/queue/v1/task-queues/ui-test%2Fnone/"+list, "application/json")
			require.Equal(t, http.StatusOK, res.StatusCode, body)
			require.JSONEq(t, `{"tasks":[]}`, body)
		}
	})
}

// fixture is what the browser test (web/browser/console.mjs) works on;
// it is handed over as JSON in HOPPER_UI_FIXTURE.
type fixture struct {
	RootURL    string            `json:"rootUrl"`
	Root       map[string]string `json:"root"`
	Limited    map[string]string `json:"limited"`
	CancelTask string            `json:"cancelTask"`
	RerunTask  string            `json:"rerunTask"`
	Group      string            `json:"group"`
	GroupSize  int               `json:"groupSize"`
	GroupToEnd string            `json:"groupToEnd"`
	// DeepGroup is a chain of DeepSize tasks, each waiting for the one
	// before: a graph far wider than the window.
	DeepGroup string `json:"deepGroup"`
	DeepLast  string `json:"deepLast"`
	DeepSize  int    `json:"deepSize"`
	LiveTask  string `json:"liveTask"`
	LogTask   string `json:"logTask"`
	// StreamTask runs on the real worker, printing, until the console
	// cancels it.
	StreamTask  string   `json:"streamTask"`
	Superseded  string   `json:"superseded"`
	Successor   string   `json:"successor"`
	Worker      []string `json:"worker"`
	IndexedTask string   `json:"indexedTask"`
	// FailedTask failed on ui-test/failing; UnpolledTask was cancelled on
	// ui-test/unpolled, which no worker ever asked for work.
	FailedTask   string `json:"failedTask"`
	UnpolledTask string `json:"unpolledTask"`
	// BlockedTask depends on FailedTask.
	BlockedTask string `json:"blockedTask"`
	// CLISignin is the page `taskcluster signin` opens, its callback a
	// local server of the test; CLISigninRefused names a callback that is
	// not on this machine.
	CLISignin        string `json:"cliSignin"`
	CLISigninRefused string `json:"cliSigninRefused"`
	BigGroup         string `json:"bigGroup,omitempty"`
	BigSize          int    `json:"bigSize,omitempty"`
	Screenshots      string `json:"screenshots,omitempty"`
}

// browser returns the system Chromium, or skips.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (CI installs Debian's chromium)")
	return ""
}

// TestConsoleInBrowser drives the web console in headless Chromium
// (puppeteer-core, web/browser/console.mjs) against a real hopper: sign-in,
// every action with a refusal shown as the queue words it, the group graph
// and timeline, and a live update when a task resolves while its page is
// open. HOPPER_UI_SCREENSHOTS=DIR saves the screenshots docs/ shows;
// HOPPER_UI_BIG_GROUP=N adds an N-task group and reports render times.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary and a headless browser")
	}
	chromium := browser(t)
	webDir := filepath.Join(e2e.RepoRoot(), "web")
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "puppeteer-core")); err != nil {
		t.Skip("puppeteer-core not installed: run `npm ci --prefix web`")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fx := buildFixture(ctx, t, root)
	// A task a real worker runs, so the task page has a log and artifacts.
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "ui-test/worker"})
	fx.LogTask = tcclient.NewTaskID()
	logDef := newTaskDef("ui-test/worker", fx.Group, "build linux (real worker)")
	logDef.Payload = json.RawMessage(`{"command":[["sh","-c","echo compiling; sleep 1; echo linking; echo done"]],"maxRunTime":60}`)
	// Its notifications: a webhook this server has no configuration for
	// (failed, with the reason) and a malformed address (refused).
	logDef.Routes = []string{"notify.webhook.console.on-completed", "notify.email.not-an-address.on-completed"}
	_, err := root.CreateTask(ctx, fx.LogTask, logDef)
	require.NoError(t, err)
	fx.GroupSize++
	require.Eventually(t, func() bool {
		st, err := root.Status(ctx, fx.LogTask)
		return err == nil && st.State == tcclient.StateCompleted
	}, 60*time.Second, 100*time.Millisecond)
	fx.StreamTask = tcclient.NewTaskID()
	streamDef := newTaskDef("ui-test/worker", tcclient.NewTaskID(), "streams until cancelled")
	streamDef.Payload = json.RawMessage(`{"command":[["sh","-c","echo streamed before the cancel; sleep 600"]],"maxRunTime":900}`)
	_, err = root.CreateTask(ctx, fx.StreamTask, streamDef)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := root.Status(ctx, fx.StreamTask)
		return err == nil && st.State == tcclient.StateRunning
	}, 60*time.Second, 100*time.Millisecond)
	fx.RootURL = srv.RootURL
	fx.Root = map[string]string{"clientId": srv.ClientID, "accessToken": srv.Token}
	fx.Screenshots = os.Getenv("HOPPER_UI_SCREENSHOTS")
	if n := os.Getenv("HOPPER_UI_BIG_GROUP"); n != "" {
		_, err := fmt.Sscan(n, &fx.BigSize)
		require.NoError(t, err)
		start := time.Now()
		fx.BigGroup = bigGroup(ctx, t, root, fx.BigSize)
		t.Logf("created and ran a %d-task group in %s", fx.BigSize, time.Since(start))
	}
	fx.IndexedTask = fx.RerunTask
	serviceFixtures(ctx, t, root, fx.IndexedTask)
	callback := startCLICallback(t)
	fx.CLISignin = cliSigninURL(srv.RootURL, callback.URL)
	fx.CLISigninRefused = cliSigninURL(srv.RootURL, "http://tc.example.com:8080/")
	data, err := json.Marshal(fx)
	require.NoError(t, err)

	cmd := exec.CommandContext(ctx, "node", filepath.Join("browser", "console.mjs"))
	cmd.Dir = webDir
	cmd.Env = append(os.Environ(), "HOPPER_UI_FIXTURE="+string(data), "CHROMIUM="+chromium)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	// The script says when the live task's page is open; the task then
	// resolves here, as a worker would resolve it.
	var out strings.Builder
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if line == "READY live" {
				resolveAsWorker(ctx, t, root, fx.LiveTask, "ui-test/live")
				_, _ = io.WriteString(stdin, "go\n")
			}
		}
	}()
	wg.Wait()
	err = cmd.Wait()
	t.Log(out.String())
	require.NoError(t, err, "browser test failed:\n%s\n%s", out.String(), stderr.String())
	require.Contains(t, out.String(), "PASS all")
	checkCLISignin(ctx, t, callback, srv.RootURL)
}

func newTaskDef(queue, group, name string, deps ...string) *tcclient.TaskDefinition {
	now := time.Now()
	return &tcclient.TaskDefinition{
		TaskQueueID: queue, TaskGroupID: group, Dependencies: deps,
		Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload:  json.RawMessage(`{"command":[["true"]],"maxRunTime":60}`),
		Metadata: tcclient.TaskMetadata{Name: name, Description: "browser test", Owner: "ui@example.com", Source: "https://example.com/ui"},
	}
}

// resolveAsWorker claims the task's pending run on queue and completes it.
func resolveAsWorker(ctx context.Context, t *testing.T, c *tcclient.Client, taskID, queue string) {
	runAsWorker(ctx, t, c, taskID, queue, 0)
}

// runAsWorker is resolveAsWorker holding the claim for hold first, so
// the run has a duration on the timeline.
func runAsWorker(ctx context.Context, t *testing.T, c *tcclient.Client, taskID, queue string, hold time.Duration) {
	for i := 0; i < 50; i++ {
		// An earlier call may have completed it on the way to its own.
		if st, err := c.Status(ctx, taskID); err == nil && st.State == tcclient.StateCompleted {
			return
		}
		claim, err := c.ClaimWork(ctx, queue, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w1", Tasks: 1})
		if err != nil {
			t.Errorf("claiming %s: %v", taskID, err)
			return
		}
		for _, ct := range claim.Tasks {
			if ct.Status.TaskID == taskID {
				time.Sleep(hold)
			}
			if _, err := c.ReportCompleted(ctx, ct.Status.TaskID, ct.RunID); err != nil {
				t.Errorf("completing %s: %v", ct.Status.TaskID, err)
			}
			if ct.Status.TaskID == taskID {
				return
			}
		}
	}
	t.Errorf("task %s never became claimable on %s", taskID, queue)
}

func buildFixture(ctx context.Context, t *testing.T, c *tcclient.Client) fixture {
	t.Helper()
	create := func(id string, def *tcclient.TaskDefinition) {
		t.Helper()
		_, err := c.CreateTask(ctx, id, def)
		require.NoError(t, err)
	}
	fx := fixture{Worker: []string{"ui-test", "quarantine", "g", "w1"}}

	limitedToken, err := c.CreateClient(ctx, "ui-test/limited", &tcclient.ClientRequest{
		Expires: tcclient.NewTime(time.Now().Add(time.Hour)), Description: "browser test: reads only",
		Scopes: []string{"queue:get-task:*", "queue:status:*"},
	})
	require.NoError(t, err)
	fx.Limited = map[string]string{"clientId": "ui-test/limited", "accessToken": limitedToken.AccessToken}

	fx.CancelTask = tcclient.NewTaskID()
	create(fx.CancelTask, newTaskDef("ui-test/actions", "", "to be cancelled"))
	fx.RerunTask = tcclient.NewTaskID()
	create(fx.RerunTask, newTaskDef("ui-test/rerun", "", "to be rerun"))
	resolveAsWorker(ctx, t, c, fx.RerunTask, "ui-test/rerun")
	// A claim by the worker the test quarantines makes its record.
	workerTask := tcclient.NewTaskID()
	create(workerTask, newTaskDef("ui-test/quarantine", "", "run by the worker to quarantine"))
	resolveAsWorker(ctx, t, c, workerTask, "ui-test/quarantine")

	// A group shaped like a small CI graph: build → tests → package,
	// with runs at different times for the timeline.
	fx.Group = tcclient.NewTaskID()
	ids := map[string]string{}
	shape := []struct {
		name string
		deps []string
		hold time.Duration // how long its run takes
	}{
		{"decision", nil, 200 * time.Millisecond}, {"build linux", []string{"decision"}, 500 * time.Millisecond},
		{"build mac", []string{"decision"}, 700 * time.Millisecond}, {"lint", []string{"decision"}, 150 * time.Millisecond},
		{"test linux 1/2", []string{"build linux"}, 300 * time.Millisecond}, {"test linux 2/2", []string{"build linux"}, 400 * time.Millisecond},
		{"test mac", []string{"build mac"}, 350 * time.Millisecond}, {"package", []string{"test linux 1/2", "test linux 2/2", "test mac"}, 250 * time.Millisecond},
		{"sign", []string{"package"}, 0}, {"publish", []string{"sign", "lint"}, 0},
	}
	for _, s := range shape {
		id := tcclient.NewTaskID()
		if s.name == "decision" {
			id = fx.Group
		}
		ids[s.name] = id
		var deps []string
		for _, d := range s.deps {
			deps = append(deps, ids[d])
		}
		create(id, newTaskDef("ui-test/graph", fx.Group, s.name, deps...))
	}
	fx.GroupSize = len(shape)
	// Run all but the last two, so the graph shows every state.
	for _, s := range shape[:len(shape)-2] {
		runAsWorker(ctx, t, c, ids[s.name], "ui-test/graph", s.hold)
	}

	fx.GroupToEnd = tcclient.NewTaskID()
	create(fx.GroupToEnd, newTaskDef("ui-test/group-end", fx.GroupToEnd, "group to cancel and seal"))
	create(tcclient.NewTaskID(), newTaskDef("ui-test/group-end", fx.GroupToEnd, "second task of the group"))

	fx.DeepGroup, fx.DeepSize = tcclient.NewTaskID(), 30
	prev := fx.DeepGroup
	create(prev, newTaskDef("ui-test/deep", fx.DeepGroup, "step 1"))
	for i := 2; i <= fx.DeepSize; i++ {
		id := tcclient.NewTaskID()
		create(id, newTaskDef("ui-test/deep", fx.DeepGroup, fmt.Sprintf("step %d", i), prev))
		prev = id
	}
	fx.DeepLast = prev

	fx.LiveTask = tcclient.NewTaskID()
	create(fx.LiveTask, newTaskDef("ui-test/live", "", "resolves while watched"))

	fx.FailedTask = tcclient.NewTaskID()
	create(fx.FailedTask, newTaskDef("ui-test/failing", "", "fails on purpose"))
	failing, err := c.ClaimWork(ctx, "ui-test/failing", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w1", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, failing.Tasks, 1)
	_, err = c.ReportFailed(ctx, fx.FailedTask, 0)
	require.NoError(t, err)
	fx.BlockedTask = tcclient.NewTaskID()
	create(fx.BlockedTask, newTaskDef("ui-test/failing", "", "needs the failed one", fx.FailedTask))
	fx.UnpolledTask = tcclient.NewTaskID()
	create(fx.UnpolledTask, newTaskDef("ui-test/unpolled", "", "cancelled before any worker came"))
	_, err = c.CancelTask(ctx, fx.UnpolledTask)
	require.NoError(t, err)

	// A superseded task and its successor, as the superseding worker
	// leaves them: exception/superseded and public/superseded-by.json.
	fx.Superseded, fx.Successor = tcclient.NewTaskID(), tcclient.NewTaskID()
	create(fx.Superseded, newTaskDef("ui-test/supersede", "", "older build"))
	create(fx.Successor, newTaskDef("ui-test/supersede", "", "newer build"))
	claim, err := c.ClaimWork(ctx, "ui-test/supersede", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w1", Tasks: 2})
	require.NoError(t, err)
	require.Len(t, claim.Tasks, 2)
	for _, ct := range claim.Tasks {
		worker := &tcclient.Client{RootURL: c.RootURL, Credentials: &ct.Credentials}
		if ct.Status.TaskID == fx.Successor {
			// A private artifact: only a signed-in user's signed link opens it.
			art, err := worker.CreateArtifact(ctx, fx.Successor, ct.RunID, "private/report.txt", &tcclient.CreateArtifactRequest{
				StorageType: tcclient.StorageS3, ContentType: "text/plain", Expires: tcclient.NewTime(time.Now().Add(time.Hour))})
			require.NoError(t, err)
			require.NoError(t, tcclient.BytesUpload(art.PutURL, "text/plain", "", []byte("for signed-in eyes only")).Do(ctx))
			continue
		}
		art, err := worker.CreateArtifact(ctx, fx.Superseded, ct.RunID, "public/superseded-by.json", &tcclient.CreateArtifactRequest{
			StorageType: tcclient.StorageS3, ContentType: "application/json", Expires: tcclient.NewTime(time.Now().Add(time.Hour))})
		require.NoError(t, err)
		require.NoError(t, tcclient.BytesUpload(art.PutURL, "application/json", "", []byte(`{"taskId":"`+fx.Successor+`","runId":0}`)).Do(ctx))
		_, err = worker.ReportException(ctx, fx.Superseded, ct.RunID, "superseded")
		require.NoError(t, err)
	}
	return fx
}

// callService sends one signed request to another Taskcluster service of
// the deployment (the typed client speaks queue and auth only).
func callService(ctx context.Context, t *testing.T, c *tcclient.Client, method, path string, body any) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, method, c.RootURL+path, strings.NewReader(string(data)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	auth, err := tcclient.AuthorizationHeader(c.Credentials, nil, method, req.URL.String())
	require.NoError(t, err)
	req.Header.Set("Authorization", auth)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	reply, _ := io.ReadAll(res.Body)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s %s: %s", method, path, reply)
}

// serviceFixtures gives the index, secrets and hooks pages something to
// show: an indexed task, a secret (whose value must never appear) and a
// hook that creates a task when triggered.
func serviceFixtures(ctx context.Context, t *testing.T, c *tcclient.Client, taskID string) {
	t.Helper()
	expires := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	callService(ctx, t, c, http.MethodPut, "/api/index/v1/task/ui-test.builds.latest",
		map[string]any{"taskId": taskID, "rank": 1, "data": map[string]any{}, "expires": expires})
	callService(ctx, t, c, http.MethodPut, "/api/secrets/v1/secret/ui-test/db-password",
		map[string]any{"secret": map[string]any{"password": "never-shown-in-the-ui"}, "expires": expires})
	_, err := c.CreateRole(ctx, "hook-id:ui-test/nightly", &tcclient.RoleRequest{Scopes: []string{"queue:*"}, Description: "browser test hook"})
	require.NoError(t, err)
	callService(ctx, t, c, http.MethodPut, "/api/hooks/v1/hooks/ui-test/nightly", map[string]any{
		"metadata": map[string]any{"name": "nightly build", "description": "browser test hook", "owner": "ui@example.com", "emailOnError": false},
		"schedule": []string{},
		"task": map[string]any{
			"taskQueueId": "ui-test/hooks", "created": map[string]any{"$fromNow": ""}, "deadline": map[string]any{"$fromNow": "1 hour"},
			"payload":  map[string]any{},
			"metadata": map[string]any{"name": "made by the nightly hook", "description": "hook", "owner": "ui@example.com", "source": "https://example.com/ui"},
		},
		"triggerSchema": map[string]any{"type": "object"},
	})
	// A static pool with one machine, for the pools page.
	callService(ctx, t, c, http.MethodPut, "/api/worker-manager/v1/worker-pool/ui-test%2Fpool", map[string]any{
		"providerId": "static", "description": "browser test pool", "owner": "ui@example.com", "emailOnError": false,
		"config": map[string]any{"workerConfig": map[string]any{}},
	})
	callService(ctx, t, c, http.MethodPut, "/api/worker-manager/v1/workers/ui-test%2Fpool/rack/m1", map[string]any{
		"expires": expires, "providerInfo": map[string]any{"staticSecret": strings.Repeat("s", 44)},
	})
}

// bigGroup creates an n-task group: layers of 100 tasks, each depending
// on one task of the layer before.
func bigGroup(ctx context.Context, t *testing.T, c *tcclient.Client, n int) string {
	t.Helper()
	group := tcclient.NewTaskID()
	ids := make([]string, n)
	ids[0] = group
	for i := 1; i < n; i++ {
		ids[i] = tcclient.NewTaskID()
	}
	// Layer by layer: a dependency must exist before its dependents.
	for start := 0; start < n; start += 100 {
		end := min(start+100, n)
		var wg sync.WaitGroup
		errs := make(chan error, end-start)
		for i := start; i < end; i++ {
			wg.Add(1)
			go func(i, start int) {
				defer wg.Done()
				var deps []string
				if i >= 100 {
					deps = []string{ids[start-100+(i*7)%100]}
				}
				if _, err := c.CreateTask(ctx, ids[i], newTaskDef("ui-test/big", group, fmt.Sprintf("task %d", i), deps...)); err != nil {
					errs <- err
				}
			}(i, start)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	// Run them all, so the timeline has n runs.
	var done sync.WaitGroup
	var mu sync.Mutex
	completed := 0
	for w := 0; w < 4; w++ {
		done.Add(1)
		go func(w int) {
			defer done.Done()
			for {
				mu.Lock()
				finished := completed >= n
				mu.Unlock()
				if finished || ctx.Err() != nil {
					return
				}
				// Never cancelled: a claim abandoned in flight would leave
				// its tasks claimed. At the end, a claimer waits out one
				// long-poll.
				claim, err := c.ClaimWork(ctx, "ui-test/big", &tcclient.ClaimWorkRequest{WorkerGroup: "big", WorkerID: fmt.Sprintf("w%d", w), Tasks: 32})
				if err != nil {
					t.Errorf("claiming: %v", err)
					return
				}
				for _, ct := range claim.Tasks {
					if _, err := c.ReportCompleted(ctx, ct.Status.TaskID, ct.RunID); err != nil {
						t.Errorf("completing: %v", err)
						return
					}
				}
				mu.Lock()
				completed += len(claim.Tasks)
				mu.Unlock()
			}
		}(w)
	}
	done.Wait()
	return group
}
