package github

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/schema"
)

// examples are the payloads of npm @octokit/webhooks-examples, by event.
func examples(t *testing.T) map[string][]map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "e2e", "node", "node_modules", "@octokit", "webhooks-examples", "api.github.com", "index.json"))
	if err != nil {
		t.Skipf("@octokit/webhooks-examples is not installed (npm ci --prefix e2e/node): %v", err)
	}
	var all []struct {
		Name     string           `json:"name"`
		Examples []map[string]any `json:"examples"`
	}
	require.NoError(t, json.Unmarshal(raw, &all))
	out := map[string][]map[string]any{}
	for _, e := range all {
		out[e.Name] = e.Examples
	}
	return out
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func with(m map[string]any, path []string, v any) map[string]any {
	b, _ := json.Marshal(m)
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	o := c
	for _, k := range path[:len(path)-1] {
		o = o[k].(map[string]any)
	}
	o[path[len(path)-1]] = v
	return c
}

func TestClassifyGitHub(t *testing.T) {
	t.Parallel()
	ex := examples(t)
	push := ex["push"][4]
	tag := ex["push"][0]
	pr := ex["pull_request"][0]
	comment := ex["issue_comment"][0]
	for _, tc := range []struct {
		name    string
		event   string
		body    map[string]any
		reply   string
		kind    string
		typ     string
		check   func(t *testing.T, e *Event)
		install *Installation
	}{
		{name: "push to a branch", event: "push", body: push, kind: KindPush, typ: "push", check: func(t *testing.T, e *Event) {
			require.Equal(t, "master", e.Branch)
			require.Equal(t, push["after"], e.SHA)
			require.Equal(t, "Codertocat", e.Organization)
			require.EqualValues(t, 1, e.InstallationID)
			require.Equal(t, "repo:github.com/Codertocat/Hello-World", e.Role())
		}},
		{name: "push of a tag", event: "push", body: tag, kind: KindPush, typ: "tag", check: func(t *testing.T, e *Event) {
			require.Equal(t, "simple-tag", e.Tag)
		}},
		{name: "deleted ref", event: "push", body: ex["push"][1], reply: "Skipping push event: the ref was deleted"},
		{name: "a merge queue's group", event: "merge_group", body: ex["merge_group"][0], kind: KindMergeGroup, typ: "merge_group", check: func(t *testing.T, e *Event) {
			require.Equal(t, TasksForMergeGroup, e.TasksFor)
			require.Equal(t, "2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d", e.SHA)
			require.Equal(t, "main", e.Branch)
			require.Equal(t, "octo-org", e.Organization)
		}},
		{name: "a merge group destroyed", event: "merge_group", body: with(ex["merge_group"][0], []string{"action"}, "destroyed"), reply: "Only checks_requested for merge_group is supported"},
		{name: "a test delivery (Gitea's: the head pushed again, before = after)", event: "push", body: with(push, []string{"before"}, push["after"]),
			reply: "Skipping push event: before and after are the same commit (a test delivery)"},
		{name: "[skip ci] in the head commit", event: "push", body: with(push, []string{"head_commit", "message"}, "wip [skip ci]"), reply: "Skipping push event"},
		{name: "[CI SKIP] in the last commit", event: "push",
			body: with(with(push, []string{"head_commit"}, nil), []string{"commits"}, []any{map[string]any{"message": "x [CI SKIP]"}}), reply: "Skipping push event"},
		{name: "pull request opened", event: "pull_request", body: pr, kind: KindPullRequest, typ: "pull_request.opened", check: func(t *testing.T, e *Event) {
			require.Equal(t, TasksForPullRequest, e.TasksFor)
			require.Equal(t, 2, e.PullNumber)
			require.Equal(t, "Codertocat", e.Opener)
			require.Equal(t, "Codertocat", e.HeadOwner)
			require.Equal(t, "Codertocat", e.BaseOwner)
		}},
		{name: "every pull request action", event: "pull_request", body: ex["pull_request"][8], kind: KindPullRequest, typ: "pull_request.labeled"},
		{name: "[skip ci] in the title", event: "pull_request", body: with(pr, []string{"pull_request", "title"}, "[skip ci] x"), reply: "Skipping pull_request event"},
		{name: "comment without a command", event: "issue_comment", body: comment, reply: "Skipping issue_comment event"},
		{name: "comment with a command", event: "issue_comment",
			body: with(with(comment, []string{"comment", "body"}, "please\n/taskcluster run tests\n"), []string{"issue", "pull_request"}, map[string]any{"url": "x"}),
			kind: KindPullRequest, typ: "issue_comment.created", check: func(t *testing.T, e *Event) {
				require.Equal(t, TasksForIssueComment, e.TasksFor)
				require.Equal(t, "run tests", e.Command)
				require.NotZero(t, e.CommentID)
			}},
		{name: "comment deleted", event: "issue_comment", body: ex["issue_comment"][5], reply: "Skipping issue_comment event"},
		{name: "release", event: "release", body: ex["release"][0], kind: KindRelease, typ: "release", check: func(t *testing.T, e *Event) {
			require.Equal(t, "published", e.Action)
			require.NotEmpty(t, e.ReleaseTarget)
		}},
		{name: "ping", event: "ping", body: ex["ping"][0], reply: "Received ping event!"},
		{name: "installation", event: "installation", body: ex["installation"][1], reply: "Created table row!",
			install: &Installation{Owner: str(ex["installation"][1], "installation", "account", "login"), ID: num(ex["installation"][1], "installation", "id")}},
		{name: "installation deleted", event: "installation", body: ex["installation"][0], reply: "Created table row!",
			install: &Installation{Owner: str(ex["installation"][0], "installation", "account", "login")}},
		{name: "check run rerequested", event: "check_run", body: ex["check_run"][7], kind: KindRerun, typ: "check_run.rerequested"},
		{name: "check run rerequested by a bot", event: "check_run", body: with(ex["check_run"][7], []string{"sender", "type"}, "Bot"),
			reply: "Skipping rerequested event started by bot"},
		{name: "check run completed", event: "check_run", body: ex["check_run"][1], reply: "Only rerequested for check runs is supported"},
		{name: "unknown event", event: "star", body: ex["star"][0], reply: "No publisher available for X-GitHub-Event: star"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := Classify(Delivery{Forge: KindGitHub, Host: "github.com", ID: "d", Name: tc.event, Body: encode(t, tc.body)})
			require.NoError(t, err)
			require.Equal(t, tc.install, dec.Installation)
			if tc.kind == "" {
				require.Nil(t, dec.Event)
				require.Equal(t, tc.reply, dec.Reply)
				return
			}
			require.NotNil(t, dec.Event, dec.Reply)
			require.Equal(t, tc.kind, dec.Event.Kind)
			require.Equal(t, tc.typ, dec.Event.Type)
			if tc.check != nil {
				tc.check(t, dec.Event)
			}
		})
	}
	_, err := Classify(Delivery{Forge: KindGitHub, Name: "push", Body: []byte(`[1]`)})
	require.Error(t, err)
	_, err = Classify(Delivery{Forge: KindGitHub, Name: "push", Body: []byte(`{"ref":"refs/heads/x","after":"ab"}`)})
	require.Error(t, err, "no repository")
	// A NUL in the commit id or the repository's name is the sender's
	// mistake (issue 34: a push whose commit id held a NUL was retried
	// ten times as if the forge were down).
	for _, field := range [][]string{{"after"}, {"repository", "name"}, {"repository", "owner", "name"}} {
		_, err = Classify(Delivery{Forge: KindGitHub, Host: "github.com", ID: "d", Name: "push", Body: encode(t, with(push, field, "91173704e\x0061291213461cc0e78900f7b68b84f8e"))})
		require.ErrorContains(t, err, "must be printable ASCII", field)
	}
}

func readGitea(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// spec24Template is the template of forge.md 2.4: it reads GitHub-only
// fields (pusher.name, head.repo.git_url) and filters on GitHub's action
// names, which broke on Gitea's raw payloads.
const spec24Template = `
version: 1
tasks:
  $let:
    owner: {$if: 'tasks_for == "github-push"', then: '${event.pusher.name}@example.com', else: '${event.pull_request.user.login}@example.com'}
    url: {$if: 'tasks_for == "github-push"', then: '${event.repository.clone_url}', else: '${event.pull_request.head.repo.git_url}'}
  in:
    $if: 'tasks_for == "github-push" || event["action"] in ["opened", "reopened", "synchronize"]'
    then:
      - taskQueueId: proj/ci
        payload: {env: {REPO: '${url}'}}
        metadata: {name: build, description: '${event.forge.kind}', owner: '${owner}', source: '${event.repository.html_url}'}
`

// TestGiteaNormalised renders the template of forge.md 2.4 against
// deliveries a real Gitea 1.26.0 sent (testdata/gitea-*.json, captured by
// TestGiteaEndToEnd): raw, they broke it; normalised, they render as
// GitHub's do.
func TestGiteaNormalised(t *testing.T) {
	t.Parallel()
	reg, err := schema.New()
	require.NoError(t, err)
	cfg, err := ParseConfig(reg, []byte(spec24Template))
	require.NoError(t, err)
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	const host = "git.example.com"

	dec, err := Classify(Delivery{Forge: KindGitea, Host: host, ID: "g1", Name: "push", Body: readGitea(t, "gitea-push.json")})
	require.NoError(t, err)
	e := dec.Event
	require.Equal(t, "alice", e.Organization, "repository.owner.name added")
	require.Equal(t, "main", e.Branch)
	require.Equal(t, "alice", lookup(e.Body, "pusher", "name"))
	r, err := cfg.Render(RenderParams{Event: e, RootURL: "https://hopper.example", Now: now, ID: IDs([]byte("k"), e.Host, e.DeliveryID)})
	require.NoError(t, err)
	require.Len(t, r.Tasks, 1)
	require.Equal(t, "alice@example.com", r.Tasks[0].Definition["metadata"].(map[string]any)["owner"])
	require.Equal(t, "gitea", r.Tasks[0].Definition["metadata"].(map[string]any)["description"])
	require.Equal(t, []string{"assume:repo:" + host + "/alice/demo:branch:main", "queue:route:statuses", "queue:scheduler-id:taskcluster-github"}, r.Scopes)

	raw := readGitea(t, "gitea-pull-request.json")
	dec, err = Classify(Delivery{Forge: KindGitea, Host: host, ID: "g2", Name: "pull_request", Body: raw})
	require.NoError(t, err)
	e = dec.Event
	require.Equal(t, "synchronize", e.Action, "Gitea's synchronized is GitHub's synchronize")
	require.Equal(t, "pull_request.synchronize", e.Type)
	require.Equal(t, "alice", e.HeadOwner, "head.user added from head.repo.owner")
	require.Equal(t, "alice", e.BaseOwner)
	require.Equal(t, "synchronized", e.Body["forge"].(map[string]any)["action"])
	require.Equal(t, "alice:feature", lookup(e.Body, "pull_request", "head", "label"))
	r, err = cfg.Render(RenderParams{Event: e, Now: now, ID: IDs([]byte("k"), e.Host, e.DeliveryID)})
	require.NoError(t, err)
	require.Len(t, r.Tasks, 1, "a new push to a pull request runs its tasks")
	require.Equal(t, lookup(e.Body, "pull_request", "head", "repo", "clone_url"), lookup(r.Tasks[0].Definition, "payload", "env", "REPO"))

	// Raw, the same delivery renders no task: the filter names GitHub's
	// action (forge.md 2.4).
	var rawEvent map[string]any
	require.NoError(t, json.Unmarshal(raw, &rawEvent))
	e.Body = rawEvent
	_, err = cfg.Render(RenderParams{Event: e, Now: now, ID: IDs([]byte("k"), e.Host, e.DeliveryID)})
	require.Error(t, err, "head.repo.git_url is not in Gitea's payload")

	dec, err = Classify(Delivery{Forge: KindGitea, Host: host, ID: "g3", Name: "issue_comment", Body: readGitea(t, "gitea-issue-comment.json")})
	require.NoError(t, err)
	require.Equal(t, TasksForIssueComment, dec.Event.TasksFor)
	require.Equal(t, "run it", dec.Event.Command)
	require.Equal(t, "alice", dec.Event.Commenter)
}

func idSource() func(string) string {
	ids := map[string]string{}
	return func(label string) string {
		if _, ok := ids[label]; !ok {
			ids[label] = ident.NewSlugID()
		}
		return ids[label]
	}
}

func TestRenderV1Defaults(t *testing.T) {
	t.Parallel()
	reg, err := schema.New()
	require.NoError(t, err)
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	push, err := FakeEvent(TasksForPush, "", "org", "repo", nil)
	require.NoError(t, err)
	push.Host = "github.com"

	// Several tasks: one fresh group id none of them has, dependencies
	// first, as_slugid stable, created = now, the statuses route once.
	cfg, err := ParseConfig(reg, []byte(`
version: 1
reporting: checks-v1
tasks:
  - {taskId: {$eval: 'as_slugid("test")'}, dependencies: [{$eval: 'as_slugid("build")'}], taskQueueId: p/w, metadata: {name: test}}
  - {taskId: {$eval: 'as_slugid("build")'}, taskQueueId: p/w, routes: [checks, index.x], metadata: {name: build}}
`))
	require.NoError(t, err)
	r, err := cfg.Render(RenderParams{Event: push, Now: now, ID: idSource()})
	require.NoError(t, err)
	require.Len(t, r.Tasks, 2)
	require.Equal(t, "build", lookup(r.Tasks[0].Definition, "metadata", "name"), "dependencies first")
	group := r.Tasks[0].Definition["taskGroupId"]
	require.Equal(t, group, r.Tasks[1].Definition["taskGroupId"])
	require.NotEqual(t, group, r.Tasks[0].TaskID)
	require.NotEqual(t, group, r.Tasks[1].TaskID)
	require.Equal(t, []any{"checks", "index.x"}, r.Tasks[0].Definition["routes"])
	require.Equal(t, []any{"checks"}, r.Tasks[1].Definition["routes"])
	require.Equal(t, queue.NewTime(now).String(), r.Tasks[0].Definition["created"])
	require.Equal(t, SchedulerID, r.Tasks[0].Definition["schedulerId"])
	require.NotContains(t, r.Tasks[0].Definition, "taskId")
	require.Equal(t, []string{"assume:repo:github.com/org/repo:branch:main", "queue:route:checks", "queue:scheduler-id:taskcluster-github"}, r.Scopes)

	// Roles per tasks_for.
	one, err := ParseConfig(reg, []byte("version: 1\ntasks: [{taskQueueId: p/w}]\n"))
	require.NoError(t, err)
	for _, tc := range []struct {
		tasksFor, action string
		overrides        map[string]any
		want             string
	}{
		{TasksForPush, "", map[string]any{"ref": "refs/tags/v1"}, "assume:repo:github.com/org/repo:tag:v1"},
		{TasksForPullRequest, "opened", nil, "assume:repo:github.com/org/repo:pull-request"},
		{TasksForPullRequestUntrusted, "opened", nil, "assume:repo:github.com/org/repo:pull-request-untrusted"},
		{TasksForRelease, "created", nil, "assume:repo:github.com/org/repo:release:created"},
		{TasksForIssueComment, "created", nil, "assume:repo:github.com/org/repo:pull-request"},
	} {
		e, err := FakeEvent(tc.tasksFor, tc.action, "org", "repo", tc.overrides)
		require.NoError(t, err)
		r, err := one.Render(RenderParams{Event: e, TasksFor: tc.tasksFor, Now: now, ID: idSource()})
		require.NoError(t, err)
		require.Equal(t, tc.want, r.Scopes[0], tc.tasksFor)
		require.Equal(t, r.Tasks[0].TaskID, r.Tasks[0].Definition["taskGroupId"], "a sole task is its own group")
	}

	// Errors a user must see.
	for _, text := range []string{"version: 1\ntasks: [{$eval: 'nope'}]\n", "version: 1\ntasks: {$eval: '{a: 1}'}\n", "version: 1\ntasks:\n  $map: {$eval: 'range(0, 5000)'}\n  each(x): {taskQueueId: p/w}\n",
		"version: 1\ntasks: [{taskId: a, dependencies: [b]}, {taskId: b, dependencies: [a]}]\n"} {
		c, err := ParseConfig(reg, []byte(text))
		require.NoError(t, err)
		_, err = c.Render(RenderParams{Event: push, Now: now, ID: idSource()})
		require.True(t, IsConfigError(err), "%s: %v", text, err)
	}
	for _, text := range []string{"version: 1\ntasks: [\n", "version: 2\n", "version: 1\nbogus: 1\n", "[1]"} {
		_, err := ParseConfig(reg, []byte(text))
		require.True(t, IsConfigError(err), "%s: %v", text, err)
	}
}

func TestRenderV0(t *testing.T) {
	t.Parallel()
	reg, err := schema.New()
	require.NoError(t, err)
	cfg, err := ParseConfig(reg, []byte(`
version: 0
metadata: {name: n, description: d, owner: o, source: s}
tasks:
  - provisionerId: p
    workerType: w
    created: '{{ $fromNow }}'
    deadline: "{{ '1 day' | $fromNow }}"
    payload: {command: ['echo {{ event.head.sha }} on {{ event.base.repo.branch }}']}
    extra: {github: {events: [push], branches: [main], env: true}}
  - provisionerId: p
    workerType: w
    extra: {github: {events: [pull_request.*]}}
`))
	require.NoError(t, err)
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	push, err := FakeEvent(TasksForPush, "", "org", "repo", nil)
	require.NoError(t, err)
	r, err := cfg.Render(RenderParams{Event: push, Now: now, ID: idSource()})
	require.NoError(t, err)
	require.Len(t, r.Tasks, 1)
	def := r.Tasks[0].Definition
	require.Equal(t, "echo "+push.SHA+" on main", lookup(def, "payload", "command").([]any)[0])
	require.Equal(t, "2026-11-27T23:00:00.000Z", def["deadline"])
	require.Equal(t, "main", lookup(def, "payload", "env", "GITHUB_BRANCH"))
	require.Equal(t, []any{"statuses"}, def["routes"])
	require.Equal(t, "assume:repo:github.com/org/repo:branch:main", r.Scopes[0])
	pr, err := FakeEvent(TasksForPullRequest, "synchronize", "org", "repo", nil)
	require.NoError(t, err)
	r, err = cfg.Render(RenderParams{Event: pr, Now: now, ID: idSource()})
	require.NoError(t, err)
	require.Len(t, r.Tasks, 1)
	require.Equal(t, "collaborators", cfg.PullRequestPolicy())
}

func TestPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy  string
		trusted bool
		action  string
		want    PullDecision
	}{
		{PolicyCollaborators, true, "opened", PullDecision{Run: true, TasksFor: TasksForPullRequest}},
		{PolicyCollaborators, false, "opened", PullDecision{Comment: true}},
		{PolicyCollaborators, false, "synchronize", PullDecision{}},
		{PolicyCollaboratorsQuiet, false, "opened", PullDecision{}},
		{PolicyPublicRestricted, false, "opened", PullDecision{Run: true, TasksFor: TasksForPullRequestUntrusted}},
		{PolicyPublicRestricted, true, "opened", PullDecision{Run: true, TasksFor: TasksForPullRequest}},
		{PolicyPublic, false, "opened", PullDecision{Run: true, TasksFor: TasksForPullRequest}},
	} {
		require.Equal(t, tc.want, DecidePull(tc.policy, tc.trusted, tc.action), "%+v", tc)
	}
	require.True(t, PullTrust(true, false, true))
	require.False(t, PullTrust(true, false, false))
	require.False(t, PullTrust(false, true, true))
	for perm, want := range map[string]bool{"owner": true, "admin": true, "maintain": true, "write": true, "triage": false, "read": false, "none": false} {
		require.Equal(t, want, Trusted(perm), perm)
	}
}

func TestBuildStates(t *testing.T) {
	t.Parallel()
	task := func(states ...string) *queue.TaskState {
		t := &queue.TaskState{}
		for i, s := range states {
			t.Runs = append(t.Runs, queue.Run{RunID: i, State: s})
		}
		return t
	}
	require.Equal(t, StatePending, GroupState([]*queue.TaskState(nil)))
	require.Equal(t, StatePending, GroupState([]*queue.TaskState{task("completed"), task("running")}))
	require.Equal(t, StateFailure, GroupState([]*queue.TaskState{task("failed"), task("running")}))
	require.Equal(t, StateFailure, GroupState([]*queue.TaskState{task("exception")}))
	require.Equal(t, StateSuccess, GroupState([]*queue.TaskState{task("completed"), task("failed", "completed")}))
	require.Equal(t, StatePending, GroupState([]*queue.TaskState{task("failed", "pending")}), "a rerun is pending again")
	require.True(t, Advances(StatePending, StateFailure))
	require.True(t, Advances(StateSuccess, StateFailure))
	require.False(t, Advances(StateFailure, StatePending))
	require.False(t, Advances(StateCancelled, StateFailure))
	require.Equal(t, "Taskcluster (pull_request)", StatusContext("Taskcluster", "pull_request.opened"))
}

func TestIDsAreStableAndValid(t *testing.T) {
	t.Parallel()
	a, b := IDs([]byte("k1"), "github.com", "d1"), IDs([]byte("k2"), "github.com", "d1")
	require.Equal(t, a("x"), a("x"))
	require.NotEqual(t, a("x"), a("y"))
	require.NotEqual(t, a("x"), b("x"))
	for _, l := range []string{"", "x", "task:0", "constructor"} {
		require.True(t, ident.ValidSlugID(a(l)), a(l))
	}
}

func TestSignature(t *testing.T) {
	t.Parallel()
	body := []byte("{\n  \"indented\": true\n}")
	h := map[string][]string{"X-Hub-Signature-256": {Sign([]byte("s"), body)}}
	sig, ok := ReadSignature(h)
	require.True(t, ok)
	require.True(t, sig.Matches([]byte("s"), body))
	require.False(t, sig.Matches([]byte("t"), body))
	require.False(t, sig.Matches([]byte("s"), []byte(`{"indented":true}`)), "the raw body, not a re-serialised one")
	gitea := map[string][]string{"X-Gitea-Signature": {Sign([]byte("s"), body)[len("sha256="):]}}
	sig, ok = ReadSignature(gitea)
	require.True(t, ok)
	require.True(t, sig.Matches([]byte("s"), body))
	_, ok = ReadSignature(map[string][]string{})
	require.False(t, ok)
	bad, ok := ReadSignature(map[string][]string{"X-Hub-Signature-256": {"sha256=zz"}})
	require.True(t, ok)
	require.False(t, bad.Matches([]byte("s"), body))
}
