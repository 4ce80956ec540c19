package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/cli"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestEndToEndTaskList finds tasks without their taskIds: `hopper task
// list` over hopper's /api/hopper/v1/tasks, by state (failed tasks of a
// queue no worker ever polled), queue, group, name and time, paged, as an
// anonymous caller too; bad filters are usage errors (exit 64) and bad
// queries InvalidRequestArguments.
func TestEndToEndTaskList(t *testing.T) {
	t.Parallel()
	needBinary(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}

	group := tcclient.NewTaskID()
	create := func(queue, name string, created time.Time) string {
		id := tcclient.NewTaskID()
		_, err := root.CreateTask(ctx, id, &tcclient.TaskDefinition{TaskQueueID: queue, TaskGroupID: group,
			Created: tcclient.NewTime(created), Deadline: tcclient.NewTime(time.Now().Add(time.Hour)),
			Payload:  json.RawMessage(`{}`),
			Metadata: tcclient.TaskMetadata{Name: name, Description: "list", Owner: "list@example.com", Source: "https://example.com/list"}})
		require.NoError(t, err)
		return id
	}
	// Resolved as a worker would, without a worker record of the queue's
	// own polling: claimTask-like claims through claimWork.
	resolve := func(queue, id string, fail bool) {
		claim, err := root.ClaimWork(ctx, queue, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
		require.NoError(t, err)
		require.Len(t, claim.Tasks, 1)
		require.Equal(t, id, claim.Tasks[0].Status.TaskID)
		if fail {
			_, err = root.ReportFailed(ctx, id, 0)
		} else {
			_, err = root.ReportCompleted(ctx, id, 0)
		}
		require.NoError(t, err)
	}
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	failed := create("list-test/builds", "Build linux", base)
	resolve("list-test/builds", failed, true)
	completed := create("list-test/builds", "build mac", base.Add(time.Minute))
	resolve("list-test/builds", completed, false)
	pending := create("list-test/tests", "test linux", base.Add(2*time.Minute))

	list := func(env []string, args ...string) cli.TaskListing {
		t.Helper()
		res := hopper(ctx, t, env, append([]string{"task", "list", "--json"}, args...)...)
		require.Equal(t, 0, res.code, res.stderr)
		return decode[cli.TaskListing](t, res)
	}
	ids := func(l cli.TaskListing) []string {
		out := []string{}
		for _, task := range l.Tasks {
			out = append(out, task.TaskID)
		}
		return out
	}
	env := srv.Env()
	anonymous := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL}
	require.Equal(t, []string{failed}, ids(list(env, "--state", "failed")), "failed tasks are found")
	require.Equal(t, []string{failed}, ids(list(anonymous, "--state", "failed")), "by anonymous callers too")
	require.Equal(t, []string{pending, completed, failed}, ids(list(env)), "newest first")
	require.Equal(t, []string{completed, failed}, ids(list(env, "--queue", "list-test/builds")))
	require.Equal(t, []string{completed, failed}, ids(list(env, "--name", "BUILD")))
	require.Equal(t, []string{pending}, ids(list(env, "--group", group, "--state", "pending")))
	require.Equal(t, []string{completed}, ids(list(env, "--from", base.Add(30*time.Second).Format(time.RFC3339), "--to", base.Add(90*time.Second).Format(time.RFC3339))))
	require.Empty(t, ids(list(env, "--since", "1m")), "all were created earlier")
	first := list(env, "--limit", "2")
	require.Equal(t, []string{pending, completed}, ids(first))
	require.NotEmpty(t, first.ContinuationToken)
	rest := list(env, "--limit", "2", "--page", first.ContinuationToken)
	require.Equal(t, []string{failed}, ids(rest))
	require.Empty(t, rest.ContinuationToken)
	one := list(env, "--state", "failed").Tasks[0]
	require.Equal(t, cli.ListedTask{TaskID: failed, State: "failed", Name: "Build linux", TaskQueueID: "list-test/builds",
		TaskGroupID: group, Created: tcclient.NewTime(base).String()}, one)

	// For people: one line a task, its time with its zone, and the token.
	res := hopper(ctx, t, append(env, "TZ=UTC"), "task", "list", "--limit", "1")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, pending+"  "+base.Add(2*time.Minute).UTC().Format("2006-01-02 15:04:05")+" UTC  list-test/tests")
	require.Contains(t, res.stdout, "more tasks match: add --page ")

	for _, bad := range [][]string{{"--state", "broken"}, {"--limit", "0"}, {"--from", "yesterday"}, {"--group", "nope"},
		{"--since", "1h", "--from", "2030-01-01T00:00:00Z"}, {"extra"}} {
		res := hopper(ctx, t, env, append([]string{"task", "list"}, bad...)...)
		require.Equal(t, 64, res.code, "%v: %s", bad, res.stderr)
	}

	// The API checks its query itself, in Taskcluster's error format.
	for _, q := range []string{"state=broken", "taskQueueId=nope", "createdFrom=yesterday", "limit=5000", "colour=red",
		"createdFrom=2030-01-02T00:00:00Z&createdTo=2030-01-01T00:00:00Z"} {
		res, err := http.Get(srv.RootURL + "/api/hopper/v1/tasks?" + q)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "%s: %s", q, body)
		require.Contains(t, string(body), `"code":"InvalidRequestArguments"`, q)
	}
	res2, err := http.Get(srv.RootURL + "/api/hopper/v1/tasks?name=" + url.QueryEscape("build linux"))
	require.NoError(t, err)
	body, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	require.Equal(t, http.StatusOK, res2.StatusCode, string(body))
	require.True(t, strings.Contains(string(body), failed), string(body))
}
