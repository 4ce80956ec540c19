package githubapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
	"github.com/hopper-ci/hopper/internal/github"
	. "github.com/hopper-ci/hopper/internal/githubapi"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

const (
	rootToken     = "githubapi-test-root-token-0123456789abcdef"
	webhookSecret = "it's a secret to everybody"
	testQueue     = "github-test/ci"
)

// bundle is a hopper with the queue, auth and github routes over a fresh
// SQLite store, a local GitHub behind it, and the service's processor
// and reporter to drive by hand.
type bundle struct {
	clock *testclock.Clock
	store store.Store
	root  *tcclient.Client
	svc   *Service
	gh    *forgetest.GitHub
	url   string
	// dieAfterCreate makes the next createTask succeed and then report a
	// failure, as a processor killed right after creating would.
	dieAfterCreate bool
}

func setup(t testing.TB) *bundle {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/hopper.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return setupOn(t, db)
}

// setupOn is setup over the store db.
func setupOn(t testing.TB, db store.Store) *bundle {
	t.Helper()
	gh := forgetest.Start(t)
	ctx := context.Background()
	var key [32]byte
	_, err := rand.Read(key[:])
	require.NoError(t, err)
	clock := testclock.New(time.Now().UTC())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sec, err := server.NewSecurity(ctx, db, rootToken, key, clock, log)
	require.NoError(t, err)
	var srv *queueapi.Server
	var handler http.Handler
	b := &bundle{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	f := &forge.Forge{Host: "github.com", Kind: forge.KindGitHub, APIURL: gh.Server.URL, AppID: gh.AppID, PrivateKey: gh.PEM,
		WebhookSecrets: [][]byte{[]byte("an old secret"), []byte(webhookSecret)}}
	svc, err := NewService(Service{Store: db, Identities: db, Roles: sec.Roles, Clock: clock, Log: log, RootURL: hs.URL, IDSecret: key[:],
		Tasks: TaskCreatorFunc(func(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
			ts, err := srv.CreateTaskAs(ctx, taskID, body, clientID, scopes)
			if err == nil && b.dieAfterCreate {
				b.dieAfterCreate = false
				return nil, io.ErrUnexpectedEOF
			}
			return ts, err
		}),
		Changes: publisherFunc(func(ctx context.Context, changes []store.Change) { srv.Publish(ctx, changes) }),
	}, []*forge.Forge{f})
	require.NoError(t, err)
	srv, err = queueapi.New(queueapi.Options{Config: queueapi.Config{RootURL: hs.URL, Version: "test"}, Store: db, Clock: clock,
		Issuer: sec.Issuer, Logger: log})
	require.NoError(t, err)
	firer := &hooksapi.Firer{Store: db, Roles: sec.Roles, Clock: clock, Log: log, Tasks: srv}
	svc.Hooks = hookTrigger{firer}
	svc.Reruns = srv
	httpSrv, err := api.New(api.Options{Clock: clock, Authorizer: sec.Authorizer, Logger: log,
		Routes: slices.Concat(queueapi.Routes(queueapi.Deps{Server: srv}), Routes(Deps{Service: svc, Version: "test", Started: clock.Now()}),
			hooksapi.Routes(hooksapi.Deps{Store: db, Sealer: sec.Sealer, Firer: firer, Caller: sec.Authorizer.Caller, Logger: log}),
			authapi.Routes(authapi.Deps{Store: db, Sealer: sec.Sealer, Clients: sec.Clients, IsStatic: sec.Clients.IsStatic,
				Roles: sec.Roles, Authenticator: sec.Authenticator, Caller: sec.Authorizer.Caller, Logger: log})),
	})
	require.NoError(t, err)
	handler = httpSrv.Handler()
	root := &tcclient.Client{RootURL: hs.URL, MaxRetries: -1, Credentials: &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: rootToken}}
	*b = bundle{clock: clock, store: db, root: root, svc: svc, gh: gh, url: hs.URL}
	return b
}

// hookTrigger is the server's adapter of the hooks' firer.
type hookTrigger struct{ firer *hooksapi.Firer }

func (h hookTrigger) TriggerHook(ctx context.Context, group, id string, payload []byte, taskID string, now time.Time) (string, error) {
	err := h.firer.Trigger(ctx, group, id, payload, taskID, ClientID, now)
	var refused *hooks.Error
	if errors.As(err, &refused) {
		return refused.Error(), nil
	}
	return "", err
}

type publisherFunc func(ctx context.Context, changes []store.Change)

func (f publisherFunc) Publish(ctx context.Context, changes []store.Change) { f(ctx, changes) }

// example returns a payload of @octokit/webhooks-examples: the index-th
// example of the event.
func example(t testing.TB, event string, index int) map[string]any {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "e2e", "node", "node_modules", "@octokit", "webhooks-examples", "api.github.com", "index.json"))
	if err != nil {
		t.Skipf("@octokit/webhooks-examples is not installed (npm ci --prefix e2e/node): %v", err)
	}
	var all []struct {
		Name     string           `json:"name"`
		Examples []map[string]any `json:"examples"`
	}
	require.NoError(t, json.Unmarshal(raw, &all))
	for _, e := range all {
		if e.Name == event {
			return e.Examples[index]
		}
	}
	t.Fatalf("no %s example", event)
	return nil
}

// deliver posts a delivery signed with secret ("" for none). Each
// delivery id gets a body of its own, as each event a forge sends has
// (a property naming the id is added): deliverExact sends the body as
// given, for replays.
func (b *bundle) deliver(t testing.TB, event, id string, body []byte, secret string) (int, string) {
	t.Helper()
	if len(body) > 1 && body[0] == '{' {
		sep := ","
		if strings.TrimSpace(string(body[1:])) == "}" {
			sep = ""
		}
		body = append([]byte(`{"hopper_test_delivery":"`+id+`"`+sep), body[1:]...)
	}
	return b.deliverExact(t, event, id, body, secret)
}

func (b *bundle) deliverExact(t testing.TB, event, id string, body []byte, secret string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+BasePath+"/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", github.Sign([]byte(secret), body))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(text)
}

const decisionTask = `
version: 1
policy:
  pullRequests: public
tasks:
  $let:
    head: {$if: 'tasks_for == "github-push"', then: '${event.after}', else: '${event.pull_request.head.sha}'}
  in:
    - taskQueueId: ` + testQueue + `
      deadline: {$fromNow: '1 day'}
      payload: {command: ['true']}
      metadata:
        name: decision
        description: for ${tasks_for}
        owner: '${event.sender.login}@users.noreply.github.com'
        source: '${event.repository.html_url}'
      extra: {head: '${head}', slug: {$eval: 'as_slugid("decision")'}}
`

func (b *bundle) role(t testing.TB, roleID string) {
	t.Helper()
	_, err := b.root.CreateRole(context.Background(), roleID, &tcclient.RoleRequest{Description: "test",
		Scopes: []string{"queue:create-task:lowest:" + testQueue, "queue:create-task:project:none"}})
	require.NoError(t, err)
}

func (b *bundle) groupTasks(t *testing.T, groupID string) []*queue.TaskState {
	t.Helper()
	tasks, _, err := b.store.ListTaskGroup(context.Background(), groupID, store.Page{})
	require.NoError(t, err)
	return tasks
}

// TestPushToStatuses is the vertical slice: a signed push delivery (a
// real GitHub payload) is stored, rendered, its task created with the
// branch's role, and its statuses sent to a GitHub that checks every
// request against its OpenAPI description; a redelivery and a replayed
// processing create nothing twice; a failed send is retried; the status
// never goes back.
func TestPushToStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
	body, err := json.Marshal(push)
	require.NoError(t, err)
	id := uuid.NewString()

	// Refused: unsigned, wrongly signed, no event name.
	status, _ := b.deliver(t, "push", id, body, "")
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = b.deliver(t, "push", id, body, "wrong")
	require.Equal(t, http.StatusForbidden, status)
	status, _ = b.deliver(t, "", id, body, webhookSecret)
	require.Equal(t, http.StatusBadRequest, status)
	huge := bytes.Repeat([]byte(" "), 11<<20)
	status, _ = b.deliver(t, "push", id, append(body[:len(body):len(body)], huge...), webhookSecret)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	status, text := b.deliver(t, "ping", uuid.NewString(), []byte(`{"zen":"x","hook_id":1}`), webhookSecret)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "Received ping event!", text)
	status, text = b.deliver(t, "watch", uuid.NewString(), []byte(`{"action":"started"}`), webhookSecret)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, text, "No publisher available")

	// Accepted, stored before the answer; a redelivery is stored once.
	status, _ = b.deliver(t, "push", id, body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	d, err := b.store.GetGithubDelivery(ctx, "github.com", id)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryPending, d.State)
	status, _ = b.deliver(t, "push", id, body, webhookSecret)
	require.Equal(t, http.StatusOK, status)

	// A replica claims it and dies: nothing happens until its lease runs
	// out. The next processor creates the task and fails before recording
	// anything; the delivery is tried again and creates the same task.
	_, err = b.store.ClaimGithubDelivery(ctx, b.clock.Now(), b.clock.Now().Add(b.svc.Lease))
	require.NoError(t, err)
	n, err := b.svc.ProcessDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "leased")
	b.clock.Advance(b.svc.Lease + time.Second)
	b.dieAfterCreate = true
	n, err = b.svc.ProcessDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	d, err = b.store.GetGithubDelivery(ctx, "github.com", id)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryPending, d.State, "tried again later")
	b.clock.Advance(time.Minute)
	n, err = b.svc.ProcessDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	d, err = b.store.GetGithubDelivery(ctx, "github.com", id)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryDone, d.State, d.Error)

	builds, _, err := b.store.ListGithubBuilds(ctx, store.GithubBuildFilter{}, store.Page{})
	require.NoError(t, err)
	require.Len(t, builds, 1)
	build := builds[0]
	require.Equal(t, sha, build.SHA)
	require.Equal(t, "push", build.EventType)
	tasks := b.groupTasks(t, build.TaskGroupID)
	require.Len(t, tasks, 1, "the replay created the same task, not a second")
	task := tasks[0]
	require.Equal(t, build.TaskGroupID, task.TaskID, "a sole task is its own group")
	require.Equal(t, github.SchedulerID, task.Task.SchedulerID)
	require.Equal(t, []string{"statuses"}, task.Task.Routes)
	require.Contains(t, string(task.Task.Extra), sha)
	require.Equal(t, "for github-push", task.Task.Metadata.Description)

	// The pending status is sent; a 502 is retried after a back-off.
	b.gh.FailWrites(1)
	require.NoError(t, b.svc.Report(ctx))
	require.Empty(t, b.gh.Calls("/statuses/"))
	b.clock.Advance(5 * time.Second)
	require.NoError(t, b.svc.Report(ctx))
	statuses := b.gh.Calls("/repos/Codertocat/Hello-World/statuses/" + sha)
	require.Len(t, statuses, 1)
	require.Equal(t, "pending", statuses[0].Body["state"])
	require.Equal(t, "Taskcluster (push)", statuses[0].Body["context"])
	require.Equal(t, b.url+"/ui/#/group/"+build.TaskGroupID, statuses[0].Body["target_url"])

	// The task is cancelled: the build fails, its status says so once.
	_, err = b.root.CancelTask(ctx, task.TaskID)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	require.NoError(t, b.svc.Report(ctx))
	statuses = b.gh.Calls("/statuses/")
	require.Len(t, statuses, 2)
	require.Equal(t, "failure", statuses[1].Body["state"])
	got, err := b.store.GetGithubBuild(ctx, build.TaskGroupID)
	require.NoError(t, err)
	require.Equal(t, github.StateFailure, got.State)
	// A late pending (a replica that listed the group before the failure)
	// cannot move it back.
	moved, err := b.store.AdvanceGithubBuild(ctx, store.AdvanceGithubBuildParams{TaskGroupID: build.TaskGroupID, From: []string{github.StateSuccess}, State: github.StatePending, Now: b.clock.Now()})
	require.NoError(t, err)
	require.False(t, moved)
	require.False(t, github.Advances(github.StateFailure, github.StatePending))

	// One installation token served every call.
	require.Equal(t, 1, b.gh.TokensIssued)
}

// TestPushErrors: a template that does not render and a task the role
// does not allow each give one comment on the commit and an error status,
// and create nothing; the same error is not commented twice.
func TestPushErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	push := example(t, "push", 4)
	sha := push["after"].(string)
	b.gh.Install("Codertocat", "Hello-World", 1)
	body, err := json.Marshal(push)
	require.NoError(t, err)

	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", "version: 1\ntasks:\n  - {$eval: 'nope.x'}\n")
	for range 2 {
		status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
		require.Equal(t, http.StatusNoContent, status)
	}
	_, err = b.svc.ProcessDue(ctx)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	comments := b.gh.Calls("/commits/" + sha + "/comments")
	require.Len(t, comments, 1, "the exact duplicate is not posted again")
	require.Contains(t, comments[0].Body["body"], "InterpreterError")
	errs := b.gh.Calls("/statuses/")
	require.Len(t, errs, 2, "each delivery's error status")
	require.Equal(t, "error", errs[0].Body["state"])
	// The status links to the delivery's page in the console, which
	// reads the delivery's record, holding the whole error; the console's
	// Builds page lists it among the deliveries that failed.
	target := errs[0].Body["target_url"].(string)
	page, ok := strings.CutPrefix(target, b.url+"/ui/#/delivery/github.com/")
	require.True(t, ok, target)
	resp, err := http.Get(b.url + BasePath + "/deliveries/github.com/" + page)
	require.NoError(t, err)
	var record map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&record))
	resp.Body.Close()
	require.Equal(t, "done", record["state"])
	require.Equal(t, "Codertocat/Hello-World", record["repository"])
	require.Contains(t, record["outcome"], "InterpreterError at template.tasks[0]")
	require.Contains(t, record["error"], "InterpreterError at template.tasks[0]")
	failed, _, err := b.root.GithubFailedDeliveries(ctx, nil)
	require.NoError(t, err)
	require.Len(t, failed, 2)
	require.Contains(t, []string{failed[0].DeliveryID, failed[1].DeliveryID}, page)
	require.Equal(t, "Codertocat/Hello-World", failed[0].Repository)

	// Without the branch's role the queue refuses the task.
	b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	status, _ := b.deliver(t, "push", uuid.NewString(), body, webhookSecret)
	require.Equal(t, http.StatusNoContent, status)
	_, err = b.svc.ProcessDue(ctx)
	require.NoError(t, err)
	require.NoError(t, b.svc.Report(ctx))
	comments = b.gh.Calls("/comments")
	require.Len(t, comments, 2)
	require.True(t, strings.Contains(comments[1].Body["body"].(string), "InsufficientScopes"), comments[1].Body["body"])
	builds, _, err := b.store.ListGithubBuilds(ctx, store.GithubBuildFilter{}, store.Page{})
	require.NoError(t, err)
	require.Empty(t, builds)
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
