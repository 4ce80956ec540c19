package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/forge/forgetest"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestGithubChecksFromBlobStorage: a hopper whose repository reports with
// `reporting: checks-v1` completes a task's check run with the excerpt of
// the log the worker uploaded to hopper's blob storage and its custom
// text, read back by the server (gzip and all), and every request is
// checked against GitHub's OpenAPI description.
func TestGithubChecksFromBlobStorage(t *testing.T) {
	t.Parallel()
	gh := forgetest.Start(t)
	examples := filepath.Join("..", "..", "e2e", "node", "node_modules", "@octokit", "webhooks-examples", "api.github.com", "index.json")
	raw, err := os.ReadFile(examples)
	if err != nil {
		t.Skipf("@octokit/webhooks-examples is not installed (npm ci --prefix e2e/node): %v", err)
	}
	var all []struct {
		Name     string           `json:"name"`
		Examples []map[string]any `json:"examples"`
	}
	require.NoError(t, json.Unmarshal(raw, &all))
	var push map[string]any
	for _, e := range all {
		if e.Name == "push" {
			push = e.Examples[4]
		}
	}
	sha := push["after"].(string)
	const tq = "github-checks-e2e/ci"
	gh.Install("Codertocat", "Hello-World", 1)
	gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", `version: 1
reporting: checks-v1
tasks:
  - taskQueueId: `+tq+`
    deadline: {$fromNow: '1 day'}
    payload: {}
    metadata: {name: e2e-checks, description: '${tasks_for}', owner: 'ci@example.com', source: '${event.repository.html_url}'}
`)
	const secret = "e2e checks webhook secret"
	srv := startGithubAppServer(t, gh, secret)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := rootClient(srv)
	root.MaxRetries = -1
	_, err = root.CreateRole(ctx, "repo:github.com/Codertocat/Hello-World:branch:master", &tcclient.RoleRequest{Description: "e2e",
		Scopes: []string{"queue:create-task:lowest:" + tq, "queue:create-task:project:none"}})
	require.NoError(t, err)

	body, err := json.Marshal(push)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.RootURL+"/api/github/v1/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "e2e-checks-1")
	req.Header.Set("X-Hub-Signature-256", github.Sign([]byte(secret), body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	if !assert.Eventually(t, func() bool { return len(gh.Calls("/check-runs")) == 1 }, 20*time.Second, 50*time.Millisecond) {
		resp, err := http.Get(srv.RootURL + "/api/github/v1/deliveries/github.com/e2e-checks-1")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %v", b, gh.Calls(""))
	}
	created := gh.Calls("/check-runs")[0]
	require.Equal(t, "queued", created.Body["status"])
	taskID := created.Body["external_id"].(string)

	res, err := root.ClaimWork(ctx, tq, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
	require.Equal(t, taskID, res.Tasks[0].Status.TaskID)
	worker := root.WithCredentials(&res.Tasks[0].Credentials)
	upload := func(name, contentType string, content []byte) {
		a, err := worker.CreateArtifact(ctx, taskID, 0, name, &tcclient.CreateArtifactRequest{
			StorageType: tcclient.StorageS3, Expires: tcclient.NewTime(time.Now().Add(time.Hour)), ContentType: contentType})
		require.NoError(t, err)
		up := tcclient.BytesUpload(a.PutURL, contentType, "", content)
		up.MaxRetries = -1
		require.NoError(t, up.Do(ctx))
	}
	var log strings.Builder
	for i := range 30000 {
		fmt.Fprintf(&log, "step %05d: \x1b[1mcompiling\x1b[0m package number %d of the project\n", i, i)
	}
	upload("public/logs/live_backing.log", "text/plain; charset=utf-8", []byte(log.String()))
	upload("public/github/customCheckRunText.md", "text/markdown", []byte("**custom** text of e2e"))
	_, err = worker.ReportFailed(ctx, taskID, 0)
	require.NoError(t, err)

	var done forgetest.Call
	require.Eventually(t, func() bool {
		for _, c := range gh.Calls("/check-runs/") {
			if c.Body["status"] == "completed" {
				done = c
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, "failure", done.Body["conclusion"])
	text := done.Body["output"].(map[string]any)["text"].(string)
	require.LessOrEqual(t, len(text), 65535)
	require.True(t, strings.HasPrefix(text, "**custom** text of e2e"), text[:min(len(text), 200)])
	require.Contains(t, text, "step 00000: compiling")
	require.Contains(t, text, "step 29999: compiling")
	require.NotContains(t, text, "step 15000:")
	require.Empty(t, gh.Calls("/statuses/"), "a checks build sends no status")
}
