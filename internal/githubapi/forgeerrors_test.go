package githubapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/githubapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestUnreadablePermission: a permission lookup the forge refuses (Gitea
// answers 403 unless the bot administers the repository) is an error on
// the commit and on the delivery's record, never an untrusted user.
func TestUnreadablePermission(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pr := example(t, "pull_request", 0)
	sha := pr["pull_request"].(map[string]any)["head"].(map[string]any)["sha"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", sprintf(prTask, "collaborators"))
	b.gh.SetFile("Codertocat", "Hello-World", "main", ".taskcluster.yml", sprintf(prTask, "collaborators"))
	b.role(t, "repo:github.com/Codertocat/Hello-World:pull-request")
	b.gh.SetPermission("Codertocat", "Hello-World", "Codertocat", forgetest.Forbidden)
	body, _ := json.Marshal(pr)
	id := uuid.NewString()
	status, _ := b.deliver(t, "pull_request", id, body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)

	require.Empty(t, b.builds(t))
	statuses := b.gh.Calls("/statuses/" + sha)
	require.Len(t, statuses, 1)
	require.Equal(t, "error", statuses[0].Body["state"])
	require.Contains(t, statuses[0].Body["description"], "could not read Codertocat's permission")
	comments := b.gh.Calls("/comments")
	require.Len(t, comments, 1)
	text := comments[0].Body["body"].(string)
	require.NotContains(t, text, "policy.pullRequests")
	require.Contains(t, text, "would not tell Codertocat's permission")
	require.Contains(t, text, "administrator")
	d, err := b.store.GetGithubDelivery(ctx, "github.com", id)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryDone, d.State)
	require.Contains(t, d.Error, "403")
}

// TestRefusalNamesTheRole: a task the queue refuses for lack of scopes is
// reported as the role's lack (repo:…), which the repository's admins
// can change, not the service's client's.
func TestRefusalNamesTheRole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	body, _ := json.Marshal(push)
	status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	comments := b.gh.Calls("/comments")
	require.Len(t, comments, 1)
	text := comments[0].Body["body"].(string)
	require.Contains(t, text, "The role `repo:github.com/Codertocat/Hello-World:branch:master` does not have sufficient scopes")
	require.NotContains(t, text, githubapi.ClientID)
}

// TestGiteaCommitErrorIsNotRetried: Gitea and Forgejo take no comment on
// a commit, so a push's error goes out as its status only; nothing is
// queued that can never be sent.
func TestGiteaCommitErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const host = "127.0.0.1:3000"
	b.svc.Forges[host] = &forge.Forge{Host: host, Kind: forge.KindGitea, APIURL: b.gh.Server.URL, Token: b.gh.IssueToken(9),
		WebhookSecrets: [][]byte{[]byte("gitea secret")}}
	b.gh.Install("alice", "demo", 9)
	body, err := os.ReadFile(filepath.Join("..", "github", "testdata", "gitea-push.json"))
	require.NoError(t, err)
	var delivered struct{ After string }
	require.NoError(t, json.Unmarshal(body, &delivered))
	b.gh.SetFile("alice", "demo", delivered.After, ".taskcluster.yml", "version: 1\ntasks:\n  - {$eval: 'nope.x'}\n")
	req, err := http.NewRequest(http.MethodPost, b.url+githubapi.BasePath+"/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Gitea-Event", "push")
	req.Header.Set("X-Gitea-Delivery", uuid.NewString())
	req.Header.Set("X-Gitea-Signature", strings.TrimPrefix(github.Sign([]byte("gitea secret"), body), "sha256="))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	b.process(t)
	statuses := b.gh.Calls("/repos/alice/demo/statuses/" + delivered.After)
	require.Len(t, statuses, 1)
	require.Equal(t, "error", statuses[0].Body["state"])
	// Nothing is left to retry: a day later nothing is due.
	b.clock.Advance(24 * time.Hour)
	due, err := b.store.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubSend,
		Owner: "test", Now: b.clock.Now(), Lease: time.Minute, Limit: 20})
	require.NoError(t, err)
	require.Empty(t, due)

	// An entry that can never be sent (a commit comment on Gitea) fails
	// at its first attempt instead of being tried for hours.
	require.NoError(t, b.store.QueueGithubOutbox(ctx, []store.GithubOutboxEntry{{Host: host, Key: "comment:x", Kind: "comment",
		Owner: "alice", Repo: "demo", Target: "sha:" + delivered.After, InstallationID: 9, Body: []byte(`{"body":"x"}`)}}, b.clock.Now()))
	_, err = b.svc.SendDue(ctx)
	require.NoError(t, err)
	b.clock.Advance(24 * time.Hour)
	due, err = b.store.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubSend,
		Owner: "test", Now: b.clock.Now(), Lease: time.Minute, Limit: 20})
	require.NoError(t, err)
	require.Empty(t, due)
	e, err := b.store.GetGithubOutbox(ctx, host, "comment:x")
	require.NoError(t, err)
	require.Equal(t, 1, e.Attempts)
	require.Contains(t, e.LastError, "no commit comments")
}

// TestReplayCreatesNothing: Gitea's Replay and Test delivery resend a
// delivery's body under a new delivery id; the commit gets no second
// task group and no second status.
func TestReplayCreatesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
	body, _ := json.Marshal(push)
	first := uuid.NewString()
	status, _ := b.deliverExact(t, "push", first, body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	replay := uuid.NewString()
	status, text := b.deliverExact(t, "push", replay, body, webhookSecret)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, text, "replays delivery "+first)
	b.process(t)
	require.Len(t, b.builds(t), 1)
	require.Len(t, b.gh.Calls("/statuses/"+sha), 1)
	d, err := b.store.GetGithubDelivery(ctx, "github.com", replay)
	require.NoError(t, err)
	require.Equal(t, first, d.ReplayOf)
	require.Equal(t, store.DeliveryDone, d.State)
}

// TestRerunReopensBuild: a task of a failed build rerun from the console
// (the queue's rerunTask) moves the build back to pending, with a
// pending status, and the build follows the rerun to its end.
func TestRerunReopensBuild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
	body, _ := json.Marshal(push)
	status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	build := b.builds(t)[0]
	taskID := b.groupTasks(t, build.TaskGroupID)[0].TaskID
	states := func() []any {
		var out []any
		for _, c := range b.gh.Calls("/statuses/" + sha) {
			out = append(out, c.Body["state"])
		}
		return out
	}

	_, err := b.root.ClaimWork(ctx, testQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "w1", Tasks: 1})
	require.NoError(t, err)
	_, err = b.root.ReportFailed(ctx, taskID, 0)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	require.Equal(t, github.StateFailure, b.builds(t)[0].State)

	b.clock.Advance(time.Minute)
	_, err = b.root.RerunTask(ctx, taskID)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	require.Equal(t, github.StatePending, b.builds(t)[0].State)
	require.Equal(t, []any{"pending", "failure", "pending"}, states())
	require.NoError(t, b.svc.Report(ctx))
	require.Equal(t, []any{"pending", "failure", "pending"}, states(), "reopened once")

	_, err = b.root.ClaimWork(ctx, testQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "w1", Tasks: 1})
	require.NoError(t, err)
	_, err = b.root.ReportCompleted(ctx, taskID, 1)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	require.Equal(t, github.StateSuccess, b.builds(t)[0].State)
	require.Equal(t, []any{"pending", "failure", "pending", "success"}, states())
}
