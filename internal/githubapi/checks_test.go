package githubapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// blobArtifacts holds artifact contents by task, run and name, and reads
// them as the server's reader does (head and tail beyond 2*keep).
type blobArtifacts struct {
	mu    sync.Mutex
	blobs map[string][]byte
}

func (a *blobArtifacts) put(taskID string, runID int, name string, content []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.blobs == nil {
		a.blobs = map[string][]byte{}
	}
	a.blobs[fmt.Sprintf("%s/%d/%s", taskID, runID, name)] = content
}

func (a *blobArtifacts) ReadArtifact(_ context.Context, taskID string, runID int, name string, keep int) ([]byte, []byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.blobs[fmt.Sprintf("%s/%d/%s", taskID, runID, name)]
	if !ok {
		return nil, nil, store.ErrNotFound
	}
	if len(b) <= 2*keep {
		return b, nil, nil
	}
	return b[:keep], b[len(b)-keep:], nil
}

const checksTasks = `
version: 1
reporting: checks-v1
tasks:
  - taskId: {$eval: 'as_slugid("build")'}
    taskQueueId: ` + testQueue + `
    deadline: {$fromNow: '1 day'}
    payload: {}
    metadata: {name: build, description: build, owner: 'ci@example.com', source: 'https://example.com'}
  - taskId: {$eval: 'as_slugid("lint")'}
    taskQueueId: ` + testQueue + `
    deadline: {$fromNow: '1 day'}
    payload: {}
    metadata: {name: lint, description: lint, owner: 'ci@example.com', source: 'https://example.com'}
`

// TestChecksV1: a repository with `reporting: checks-v1` gets one check
// run per task and no status, each request checked against GitHub's
// OpenAPI description: queued when the task is defined, in_progress when
// it runs, completed with Taskcluster's conclusion when it resolves, with
// the custom text, the annotations and a log excerpt under GitHub's cap;
// a new run gets a new check run; nothing is sent twice.
func TestChecksV1(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	arts := &blobArtifacts{}
	b.svc.Artifacts = arts
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", checksTasks)
	b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
	body, err := json.Marshal(push)
	require.NoError(t, err)
	status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
	require.Equal(t, 204, status)
	b.process(t)

	builds := b.builds(t)
	require.Len(t, builds, 1)
	build := builds[0]
	require.Equal(t, github.ReportingChecks, build.Reporting)
	tasks := b.groupTasks(t, build.TaskGroupID)
	require.Len(t, tasks, 2)
	ids := map[string]string{}
	for _, task := range tasks {
		require.Equal(t, []string{"checks"}, task.Task.Routes)
		ids[task.Task.Metadata.Name] = task.TaskID
	}

	created := b.gh.Calls("/repos/Codertocat/Hello-World/check-runs")
	require.Len(t, created, 2)
	checkIDs := map[string]string{}
	for _, c := range created {
		require.Equal(t, "POST", c.Method)
		require.Equal(t, sha, c.Body["head_sha"])
		require.Equal(t, "queued", c.Body["status"])
		name := c.Body["name"].(string)
		require.Equal(t, ids[name], c.Body["external_id"])
		require.Equal(t, b.url+"/ui/#/task/"+ids[name], c.Body["details_url"])
		got, err := b.store.GetGithubCheck(ctx, "github.com", ids[name], 0)
		require.NoError(t, err)
		require.NotZero(t, got.CheckRunID)
		checkIDs[name] = fmt.Sprint(got.CheckRunID)
	}
	require.Empty(t, b.gh.Calls("/statuses/"), "a checks build sends no status")

	// Both run: each check run is updated to in_progress.
	claims, err := b.root.ClaimWork(ctx, testQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "w1", Tasks: 2})
	require.NoError(t, err)
	require.Len(t, claims.Tasks, 2)
	require.NoError(t, b.svc.Report(ctx))
	calls := b.gh.Calls("/check-runs/")
	require.Len(t, calls, 2)
	for _, c := range calls {
		require.Equal(t, "PATCH", c.Method)
		require.Equal(t, "in_progress", c.Body["status"])
		require.NotContains(t, c.Body, "head_sha")
	}

	// build fails with its artifacts: the custom text, the annotations
	// and an excerpt of a log far over GitHub's cap.
	var log strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&log, "\x1b[32mline %05d\x1b[0m of a long build log, with some words to make it longer\n", i)
	}
	arts.put(ids["build"], 0, "public/logs/live_backing.log", []byte(log.String()))
	arts.put(ids["build"], 0, "public/github/customCheckRunText.md", []byte("## Custom text\nfrom the task"))
	arts.put(ids["build"], 0, "public/github/customCheckRunAnnotations.json", []byte(`[
		{"path": "main.go", "start_line": 3, "end_line": 3, "annotation_level": "failure", "message": "broken"}, 7]`))
	_, err = b.root.ReportFailed(ctx, ids["build"], 0)
	require.NoError(t, err)
	// lint's worker shuts down: the queue retries it in a new run.
	_, err = b.root.ReportException(ctx, ids["lint"], 0, "worker-shutdown")
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))

	calls = b.gh.Calls("/check-runs")
	require.Len(t, calls, 2+2+3)
	byPath := map[string]map[string]any{}
	for _, c := range calls[4:] {
		byPath[c.Method+" "+c.Path] = c.Body
	}
	failed := byPath["PATCH /repos/Codertocat/Hello-World/check-runs/"+checkIDs["build"]]
	require.NotNil(t, failed, "%v", byPath)
	require.Equal(t, "completed", failed["status"])
	require.Equal(t, "failure", failed["conclusion"])
	out := failed["output"].(map[string]any)
	require.Equal(t, "build: failure", out["title"])
	require.Contains(t, out["summary"], b.url+"/ui/#/task/"+ids["build"])
	text := out["text"].(string)
	require.LessOrEqual(t, len(text), 65535)
	require.True(t, strings.HasPrefix(text, "## Custom text\nfrom the task"), text[:100])
	require.Contains(t, text, "line 00000 of")
	require.Contains(t, text, "line 00019 of")
	require.NotContains(t, text, "line 00020 of")
	require.NotContains(t, text, "line 19799 of")
	require.Contains(t, text, "line 19800 of")
	require.Contains(t, text, "line 19999 of")
	require.NotContains(t, text, "\x1b[")
	require.Len(t, out["annotations"], 1)

	shutdown := byPath["PATCH /repos/Codertocat/Hello-World/check-runs/"+checkIDs["lint"]]
	require.NotNil(t, shutdown)
	require.Equal(t, "neutral", shutdown["conclusion"])
	rerun := byPath["POST /repos/Codertocat/Hello-World/check-runs"]
	require.NotNil(t, rerun, "a new run gets a new check run")
	require.Equal(t, "queued", rerun["status"])
	require.Equal(t, ids["lint"], rerun["external_id"])

	// The new run completes; the build resolves as failed.
	claims, err = b.root.ClaimWork(ctx, testQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "w1", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, claims.Tasks, 1)
	_, err = b.root.ReportCompleted(ctx, ids["lint"], 1)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	require.NoError(t, b.svc.Report(ctx))
	calls = b.gh.Calls("/check-runs")
	require.Len(t, calls, 7+1, "running and completed in one update: the newest state is what is sent")
	last := calls[7]
	require.Equal(t, "PATCH", last.Method)
	require.Equal(t, "success", last.Body["conclusion"])
	got, err := b.store.GetGithubBuild(ctx, build.TaskGroupID)
	require.NoError(t, err)
	require.Equal(t, github.StateFailure, got.State)
	require.Empty(t, b.gh.Calls("/statuses/"))

	// A user asks GitHub to run build's check again: without the
	// repository's :rerun role the refusal is a comment; with it the task
	// gets a new run (and a new check run) and the build is pending again.
	rerequest := func() {
		t.Helper()
		ev := example(t, "check_run", 7)
		require.Equal(t, "rerequested", ev["action"])
		ev["check_run"].(map[string]any)["id"] = json.Number(checkIDs["build"])
		ev["check_run"].(map[string]any)["head_sha"] = sha
		repo := ev["repository"].(map[string]any)
		repo["name"], repo["full_name"] = "Hello-World", "Codertocat/Hello-World"
		repo["owner"].(map[string]any)["login"] = "Codertocat"
		body, err := json.Marshal(ev)
		require.NoError(t, err)
		id := uuid.NewString()
		status, _ := b.deliver(t, "check_run", id, body, webhookSecret)
		require.Equal(t, 204, status)
		b.process(t)
		d, err := b.store.GetGithubDelivery(ctx, "github.com", id)
		require.NoError(t, err)
		require.Equal(t, store.DeliveryDone, d.State, d.Error)
	}
	rerequest()
	comments := b.gh.Calls("/commits/" + sha + "/comments")
	require.Len(t, comments, 1)
	require.Contains(t, comments[0].Body["body"], "could not rerun task "+ids["build"])
	_, err = b.root.CreateRole(ctx, "repo:github.com/Codertocat/Hello-World:rerun", &tcclient.RoleRequest{Description: "reruns",
		Scopes: []string{"queue:rerun-task:taskcluster-github/*"}})
	require.NoError(t, err)
	rerequest()
	got, err = b.store.GetGithubBuild(ctx, build.TaskGroupID)
	require.NoError(t, err)
	require.Equal(t, github.StatePending, got.State)
	calls = b.gh.Calls("/check-runs")
	require.Len(t, calls, 9)
	require.Equal(t, "POST", calls[8].Method, "a new check run for the new run")
	require.Equal(t, ids["build"], calls[8].Body["external_id"])
	require.Equal(t, "queued", calls[8].Body["status"])
	check, err := b.store.GetGithubCheck(ctx, "github.com", ids["build"], 1)
	require.NoError(t, err)
	require.NotZero(t, check.CheckRunID)
}

// TestBadgeAndLatestReadCheckRuns: a build reporting with check runs
// sends no status, so badge and latest read its check runs too (as
// Taskcluster does): pending while they run, failing once one fails, and
// latest leads to the first check run.
func TestBadgeAndLatestReadCheckRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetCommit("Codertocat", "Hello-World", "master", sha)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", checksTasks)
	b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
	_, err := b.root.UpdateRole(ctx, "anonymous", &tcclient.RoleRequest{Description: "badges for all",
		Scopes: []string{"github:get-badge:*", "github:latest-status:*"}})
	require.NoError(t, err)
	badge := func() string {
		t.Helper()
		resp, err := http.Get(b.url + "/api/github/v1/repository/Codertocat/Hello-World/master/badge.svg")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp.Header.Get("X-Taskcluster-Status")
	}
	require.Equal(t, "newrepo", badge())

	body, err := json.Marshal(push)
	require.NoError(t, err)
	status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
	require.Equal(t, 204, status)
	b.process(t)
	require.Empty(t, b.gh.Calls("/statuses/"))
	require.Equal(t, "pending", badge())

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(b.url + "/api/github/v1/repository/Codertocat/Hello-World/master/latest")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	first := b.gh.Calls("/repos/Codertocat/Hello-World/check-runs")[0]
	require.Contains(t, resp.Header.Get("Location"), "/Codertocat/Hello-World/runs/")
	require.NotNil(t, first)

	tasks := b.groupTasks(t, b.builds(t)[0].TaskGroupID)
	_, err = b.root.ClaimWork(ctx, testQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "w1", Tasks: 2})
	require.NoError(t, err)
	_, err = b.root.ReportFailed(ctx, tasks[0].TaskID, 0)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	require.Equal(t, "failure", badge())
}
