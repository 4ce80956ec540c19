package githubapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/githubapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

const prTask = `
version: 1
policy:
  pullRequests: %s
  allowComments: collaborators
tasks:
  - taskQueueId: ` + testQueue + `
    deadline: {$fromNow: '1 day'}
    payload: {}
    metadata: {name: '${tasks_for}', description: '${event.action}', owner: 'ci@example.com', source: 'https://example.com'}
`

func (b *bundle) process(t *testing.T) {
	t.Helper()
	_, err := b.svc.ProcessDue(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(context.Background()))
}

func (b *bundle) builds(t *testing.T) []store.GithubBuild {
	t.Helper()
	builds, _, err := b.store.ListGithubBuilds(context.Background(), store.GithubBuildFilter{}, store.Page{})
	require.NoError(t, err)
	return builds
}

// TestPullRequests: the policy comes from the default branch, trust from
// the permission endpoint; an untrusted pull request under
// collaborators gets a comment (on opened only) and no tasks, under
// public_restricted the untrusted role.
func TestPullRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pr := example(t, "pull_request", 0) // opened by Codertocat, head and base Codertocat's
	sha := pr["pull_request"].(map[string]any)["head"].(map[string]any)["sha"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetDefaultBranch("Codertocat", "Hello-World", "main")
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", sprintf(prTask, "collaborators"))
	b.gh.SetFile("Codertocat", "Hello-World", "main", ".taskcluster.yml", sprintf(prTask, "collaborators"))
	b.role(t, "repo:github.com/Codertocat/Hello-World:pull-request")
	b.role(t, "repo:github.com/Codertocat/Hello-World:pull-request-untrusted")
	b.gh.SetPull("Codertocat", "Hello-World", 2, pr["pull_request"].(map[string]any))
	body, _ := json.Marshal(pr)

	// Accepted deliveries are announced on the GithubEvents exchanges.
	bus := events.NewBus(events.BusOptions{})
	t.Cleanup(func() { _ = bus.Close() })
	msgs, cancel := bus.Subscribe(nil)
	defer cancel()
	b.svc.Events = bus

	// Not a collaborator: a comment, no tasks.
	b.gh.SetPermission("Codertocat", "Hello-World", "Codertocat", "read")
	id := uuid.NewString()
	status, _ := b.deliver(t, "pull_request", id, body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	msg := <-msgs
	require.Equal(t, "pull-request", msg.Exchange)
	require.Equal(t, "primary.Codertocat.Hello-World.opened", msg.RoutingKey)
	var announced map[string]any
	require.NoError(t, json.Unmarshal(msg.Body, &announced))
	require.Equal(t, id, announced["eventId"])
	require.Equal(t, "github-pull-request", announced["tasks_for"])
	b.process(t)
	require.Empty(t, b.builds(t))
	comments := b.gh.Calls("/issues/2/comments")
	require.Len(t, comments, 1)
	require.Contains(t, comments[0].Body["body"], "No Taskcluster jobs started for this pull request")

	// public_restricted on the default branch: the untrusted role.
	b.gh.SetFile("Codertocat", "Hello-World", "main", ".taskcluster.yml", sprintf(prTask, "public_restricted"))
	status, _ = b.deliver(t, "pull_request", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	builds := b.builds(t)
	require.Len(t, builds, 1)
	require.Equal(t, "pull_request.opened", builds[0].EventType)
	require.Equal(t, 2, builds[0].PullRequestNumber)
	task := b.groupTasks(t, builds[0].TaskGroupID)[0]
	require.Equal(t, github.TasksForPullRequestUntrusted, task.Task.Metadata.Name)
	b.requireIdentity(t, task.TaskID, "repo:github.com/Codertocat/Hello-World:pull-request-untrusted", true)

	// A collaborator with write access: the trusted role.
	b.gh.SetPermission("Codertocat", "Hello-World", "Codertocat", "write")
	status, _ = b.deliver(t, "pull_request", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	builds = b.builds(t)
	require.Len(t, builds, 2)
	task = b.groupTasks(t, builds[0].TaskGroupID)[0]
	require.Equal(t, github.TasksForPullRequest, task.Task.Metadata.Name)
	require.Len(t, b.gh.Calls("/statuses/"+sha), 2)
	b.requireIdentity(t, task.TaskID, "repo:github.com/Codertocat/Hello-World:pull-request", false)
}

// requireIdentity checks what the service vouched for about a task it
// created: the forge claims of its identity tokens.
func (b *bundle) requireIdentity(t *testing.T, taskID, role string, untrusted bool) {
	t.Helper()
	rec, err := b.store.GetTaskIdentity(context.Background(), taskID)
	require.NoError(t, err)
	f, err := auth.DecodeForgeClaims(rec.Claims)
	require.NoError(t, err)
	require.Equal(t, role, f.Role)
	require.Equal(t, untrusted, f.Untrusted)
	require.Equal(t, "github.com", f.Host)
	require.Equal(t, "Codertocat/Hello-World", f.Repository)
	require.Equal(t, "refs/pull/2/head", f.Ref)
	require.Equal(t, "pull_request.opened", f.Event)
	require.Len(t, f.SHA, 40)
}

// TestCommentCommand: `/taskcluster <cmd>` on an open pull request runs
// the template with the fetched pull request and the command, for
// trusted commenters, and says why not to others.
func TestCommentCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	comment := example(t, "issue_comment", 0)
	issue := comment["issue"].(map[string]any)
	issue["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"}
	issue["state"] = "open"
	comment["comment"].(map[string]any)["body"] = "/taskcluster retry all"
	number := int(issue["number"].(float64))
	pr := example(t, "pull_request", 0)["pull_request"].(map[string]any)
	sha := pr["head"].(map[string]any)["sha"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetPull("Codertocat", "Hello-World", number, pr)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", sprintf(prTask, "collaborators")+
		"    extra: {cmd: '${event.taskcluster_comment}', head: '${event.pull_request.head.sha}'}\n")
	b.gh.SetFile("Codertocat", "Hello-World", "main", ".taskcluster.yml", sprintf(prTask, "collaborators"))
	b.role(t, "repo:github.com/Codertocat/Hello-World:pull-request")
	commenter := comment["comment"].(map[string]any)["user"].(map[string]any)["login"].(string)
	body, _ := json.Marshal(comment)

	b.gh.SetPermission("Codertocat", "Hello-World", commenter, "read")
	status, _ := b.deliver(t, "issue_comment", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	require.Empty(t, b.builds(t))
	require.Len(t, b.gh.Calls("/reactions"), 1)
	require.Equal(t, "eyes", b.gh.Calls("/reactions")[0].Body["content"])

	b.gh.SetPermission("Codertocat", "Hello-World", commenter, "admin")
	status, _ = b.deliver(t, "issue_comment", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	builds := b.builds(t)
	require.Len(t, builds, 1)
	require.Equal(t, "issue_comment.created", builds[0].EventType)
	task := b.groupTasks(t, builds[0].TaskGroupID)[0]
	require.JSONEq(t, `{"cmd":"retry all","head":"`+sha+`"}`, string(task.Task.Extra))
	require.Equal(t, "+1", b.gh.Calls("/reactions")[1].Body["content"])
}

// TestReleaseAndInstallation: a release's commit is resolved from its
// target; an installation event records where the App is, so deliveries
// without an installation id find it.
func TestReleaseAndInstallation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	install := example(t, "installation", 1)
	body, _ := json.Marshal(install)
	status, text := b.deliver(t, "installation", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusOK, status, text)
	owner := install["installation"].(map[string]any)["account"].(map[string]any)["login"].(string)
	id, err := b.store.GetGithubInstallation(ctx, "github.com", owner)
	require.NoError(t, err)
	require.EqualValues(t, install["installation"].(map[string]any)["id"], id)

	release := example(t, "release", 0)
	delete(release, "installation")
	require.NoError(t, b.store.PutGithubInstallation(ctx, "github.com", "Codertocat", 7))
	b.gh.Install("Codertocat", "Hello-World", 7)
	target := release["release"].(map[string]any)["target_commitish"].(string)
	const sha = "1111111111111111111111111111111111111111"
	b.gh.SetCommit("Codertocat", "Hello-World", target, sha)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", sprintf(prTask, "collaborators"))
	b.role(t, "repo:github.com/Codertocat/Hello-World:release:published")
	body, _ = json.Marshal(release)
	status, _ = b.deliver(t, "release", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	builds := b.builds(t)
	require.Len(t, builds, 1)
	require.Equal(t, sha, builds[0].SHA)
	require.Equal(t, "release", builds[0].EventType)
	require.EqualValues(t, 7, builds[0].InstallationID)
}

// TestGiteaPushThroughWebhook: a Gitea delivery (indented body, Gitea's
// signature header) on a token forge renders the same GitHub template and
// creates its task with the forge host's role; its status goes back with
// the token.
func TestGiteaPushThroughWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const host = "127.0.0.1:3000"
	b.svc.Forges[host] = &forge.Forge{Host: host, Kind: forge.KindGitea, APIURL: b.gh.Server.URL, Token: b.gh.IssueToken(9),
		WebhookSecrets: [][]byte{[]byte("gitea secret")}}
	b.gh.Install("alice", "demo", 9)
	body, err := os.ReadFile(filepath.Join("..", "github", "testdata", "gitea-push.json"))
	require.NoError(t, err)
	var delivered struct{ After string }
	require.NoError(t, json.Unmarshal(body, &delivered))
	sha := delivered.After
	b.gh.SetFile("alice", "demo", sha, ".taskcluster.yml", decisionTask)
	b.role(t, "repo:"+host+"/alice/demo:branch:main")

	req, err := http.NewRequest(http.MethodPost, b.url+githubapi.BasePath+"/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitea-Event", "push")
	req.Header.Set("X-Gitea-Delivery", uuid.NewString())
	req.Header.Set("X-Gitea-Signature", strings.TrimPrefix(github.Sign([]byte("gitea secret"), body), "sha256="))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	b.process(t)
	builds := b.builds(t)
	require.Len(t, builds, 1)
	require.Equal(t, host, builds[0].Host)
	task := b.groupTasks(t, builds[0].TaskGroupID)[0]
	require.Equal(t, "alice@users.noreply.github.com", task.Task.Metadata.Owner)
	statuses := b.gh.Calls("/repos/alice/demo/statuses/" + sha)
	require.Len(t, statuses, 1)
	require.Equal(t, "pending", statuses[0].Body["state"])
}

// TestHooksFromTaskclusterYml: a `.taskcluster.yml` triggers a hook when
// the event's role grants github:trigger-hook:<name>; the hook's task is
// the build's group, created with the hook's role; without the scope the
// users are told and nothing fires.
func TestHooksFromTaskclusterYml(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml",
		"version: 1\nhooks:\n  - name: ci/decide\n    context: {level: 3}\ntasks: []\n")
	_, err := b.root.CreateHook(ctx, "ci", "decide", &tcclient.Hook{
		Metadata:      json.RawMessage(`{"name":"n","description":"d","owner":"o@example.com"}`),
		TriggerSchema: json.RawMessage(`{"type":"object"}`),
		Task: json.RawMessage(`{"taskQueueId":"` + testQueue + `","payload":{},"deadline":{"$fromNow":"1 hour"},
			"extra":{"level":{"$eval":"payload.context.level"},"for":"${payload.tasks_for}","sha":"${payload.event.after}"},
			"metadata":{"name":"decide","description":"d","owner":"o@example.com","source":"https://example.com"}}`),
	})
	require.NoError(t, err)
	_, err = b.root.CreateRole(ctx, "hook-id:ci/*", &tcclient.RoleRequest{Description: "t",
		Scopes: []string{"queue:create-task:lowest:" + testQueue, "queue:create-task:project:none", "queue:scheduler-id:-"}})
	require.NoError(t, err)
	body, _ := json.Marshal(push)

	// Without github:trigger-hook:ci/decide in the branch's role.
	b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
	status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	require.Empty(t, b.builds(t))
	comments := b.gh.Calls("/comments")
	require.Len(t, comments, 1)
	require.Contains(t, comments[0].Body["body"], "github:trigger-hook:ci/decide")

	_, err = b.root.UpdateRole(ctx, "repo:github.com/Codertocat/Hello-World:branch:master", &tcclient.RoleRequest{Description: "t",
		Scopes: []string{"github:trigger-hook:ci/decide"}})
	require.NoError(t, err)
	status, _ = b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	builds := b.builds(t)
	require.Len(t, builds, 1, "%v", b.gh.Calls("/comments"))
	tasks := b.groupTasks(t, builds[0].TaskGroupID)
	require.Len(t, tasks, 1)
	require.Equal(t, builds[0].TaskGroupID, tasks[0].TaskID)
	require.JSONEq(t, `{"level":3,"for":"github-push","sha":"`+sha+`"}`, string(tasks[0].Task.Extra))
}

// TestAutoCancel: a newer push to a pull request cancels the pending
// build of the older commit; an older push delivered after the newer one
// (deliveries arrive out of order) cancels its own groups instead of the
// newer build.
func TestAutoCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pr := example(t, "pull_request", 0)
	pull := pr["pull_request"].(map[string]any)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", "main", ".taskcluster.yml", sprintf(prTask, "public"))
	b.role(t, "repo:github.com/Codertocat/Hello-World:pull-request")
	push := func(sha, action string) string {
		pull["head"].(map[string]any)["sha"] = sha
		pr["action"] = action
		b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", sprintf(prTask, "public"))
		body, _ := json.Marshal(pr)
		id := uuid.NewString()
		status, _ := b.deliver(t, "pull_request", id, body, webhookSecret)
		require.Equal(t, http.StatusNoContent, status)
		return id
	}
	state := func(sha string) string {
		builds, _, err := b.store.ListGithubBuilds(ctx, store.GithubBuildFilter{SHA: sha, Repository: "Hello-World"}, store.Page{})
		require.NoError(t, err)
		require.Len(t, builds, 1, sha)
		return builds[0].State
	}
	const sha1, sha2, sha3 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333"
	pull["number"] = float64(2)

	b.gh.SetPull("Codertocat", "Hello-World", 2, map[string]any{"number": 2, "head": map[string]any{"sha": sha1}})
	push(sha1, "opened")
	b.process(t)
	require.Equal(t, "pending", state(sha1))

	b.gh.SetPull("Codertocat", "Hello-World", 2, map[string]any{"number": 2, "head": map[string]any{"sha": sha3}})
	push(sha3, "synchronize")
	push(sha2, "synchronize") // older than sha3, delivered after it
	b.process(t)
	require.Equal(t, "cancelled", state(sha1), "superseded")
	require.Equal(t, "pending", state(sha3))
	require.Equal(t, "cancelled", state(sha2), "stale on arrival")
	for _, sha := range []string{sha1, sha2} {
		builds, _, err := b.store.ListGithubBuilds(ctx, store.GithubBuildFilter{SHA: sha, Repository: "Hello-World"}, store.Page{})
		require.NoError(t, err)
		for _, task := range b.groupTasks(t, builds[0].TaskGroupID) {
			require.Equal(t, "exception", task.State(), sha)
		}
	}
	calls := b.gh.Calls("/statuses/" + sha2)
	require.Equal(t, "error", calls[len(calls)-1].Body["state"])
}

// TestReplicasProcessOnce: deliveries arriving in a burst, processed and
// reported by several replicas at once, each create their task once and
// send their status once.
func TestReplicasProcessOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
	body, _ := json.Marshal(push)
	const n = 16
	for range n {
		status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
		require.Equal(t, http.StatusNoContent, status)
	}
	run := func(pass func(*githubapi.Service) error) {
		var wg sync.WaitGroup
		for range 4 {
			replica := *b.svc // another replica: same store, same forges
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := pass(&replica); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	run(func(s *githubapi.Service) error { _, err := s.ProcessDue(ctx); return err })
	run(func(s *githubapi.Service) error { return s.Report(ctx) })
	builds := b.builds(t)
	require.Len(t, builds, n)
	for _, build := range builds {
		require.Len(t, b.groupTasks(t, build.TaskGroupID), 1)
	}
	require.Len(t, b.gh.Calls("/statuses/"+sha), n, "one pending status per build, each sent once")
}

// TestMergeGroup: a merge queue's checks_requested runs the group's
// commit with the base branch's merge-group role, tasks_for
// github-merge-group, and reports on that commit, the check the queue
// waits for.
func TestMergeGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mg := example(t, "merge_group", 0)
	sha := mg["merge_group"].(map[string]any)["head_sha"].(string)
	b.gh.Install("octo-org", "octo-repo", 1)
	b.gh.SetFile("octo-org", "octo-repo", sha, ".taskcluster.yml", `
version: 1
tasks:
  - $if: 'tasks_for == "github-merge-group"'
    then:
      taskQueueId: `+testQueue+`
      deadline: {$fromNow: '1 day'}
      payload: {}
      metadata: {name: 'queue check', description: '${event.merge_group.head_ref}', owner: 'ci@example.com', source: 'https://example.com'}
`)
	b.role(t, "repo:github.com/octo-org/octo-repo:merge-group:main")
	body, _ := json.Marshal(mg)
	status, _ := b.deliver(t, "merge_group", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	b.process(t)
	builds := b.builds(t)
	require.Len(t, builds, 1)
	require.Equal(t, "merge_group", builds[0].EventType)
	require.Equal(t, sha, builds[0].SHA)
	tasks := b.groupTasks(t, builds[0].TaskGroupID)
	require.Len(t, tasks, 1)
	require.Contains(t, tasks[0].Task.Metadata.Description, "gh-readonly-queue/main/")
	statuses := b.gh.Calls("/statuses/" + sha)
	require.Len(t, statuses, 1)
	require.Equal(t, "Taskcluster (merge_group)", statuses[0].Body["context"])
	require.Equal(t, "pending", statuses[0].Body["state"])
}
