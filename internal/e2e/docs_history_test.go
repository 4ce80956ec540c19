package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestHistoryGuideTaskList runs docs/history.md's `hopper task list`
// lines as written against a server with two failed tasks; the next
// page's token is the one a listing of one task prints on its last line.
func TestHistoryGuideTaskList(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default"})
	var failed []string
	for range 2 {
		_, errOut, code := hopperCLI(t, srv.Env(), "task", "run", "--name", "build linux", "--", "sh", "-c", "exit 1")
		require.Equal(t, 1, code, errOut)
		failed = append(failed, regexp.MustCompile(`Task (\S+) created`).FindStringSubmatch(errOut)[1])
	}
	out, err := e2e.DocShell{Env: srv.Env(), Replace: []string{"<token>",
		`"$(hopper task list --state failed --limit 1 | sed -n 's/^more tasks match: add --page //p')"`}}.
		Run(t, e2e.DocExample(t, "history-task-list"))
	require.NoError(t, err, out)
	for _, id := range failed {
		require.Contains(t, out, id)
	}
	// The last line's page holds the older of the two failed tasks.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Contains(t, lines[len(lines)-1], failed[0])
}

// TestHistoryGuideTasksAPI sends the request docs/history.md describes:
// its first line's method, path and every parameter it names, each given
// a value that selects one of two failed tasks, signed with Hawk; the
// reply has the shape the second line shows, and the next page (its
// continuationToken) holds the other task.
func TestHistoryGuideTasksAPI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	block := e2e.DocExample(t, "history-tasks-api")
	lines := strings.Split(strings.TrimSpace(block.Text), "\n")
	require.Len(t, lines, 2, "the request, then the reply")
	method, target, ok := strings.Cut(lines[0], " ")
	require.True(t, ok)
	path, rawQuery, _ := strings.Cut(target, "?")
	described, err := url.ParseQuery(rawQuery)
	require.NoError(t, err)

	srv := e2e.StartServer(t, e2e.ServerOptions{})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default"})
	// Two failed tasks of one group, one after the other (newest first
	// is then the second).
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	group := tcclient.NewTaskID()
	var failed []string
	for range 2 {
		id := tcclient.NewTaskID()
		def := backupTaskDef("hopper/default")
		def.TaskGroupID = group
		def.Metadata.Name = "build linux"
		def.Payload = json.RawMessage(`{"command": [["sh", "-c", "exit 1"]], "maxRunTime": 60}`)
		_, err := q.CreateTask(ctx, id, def)
		require.NoError(t, err)
		waitForRun(t, ctx, q, id, 0, tcclient.StateFailed, 2*time.Minute)
		failed = append(failed, id)
	}
	values := map[string]string{
		"state": "failed", "taskQueueId": "hopper/default", "taskGroupId": group, "name": "build linux",
		"createdFrom": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "createdTo": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"limit": "1",
	}
	call := func(token string) map[string]any {
		t.Helper()
		query := url.Values{}
		for name := range described {
			switch v, known := values[name]; {
			case name == "continuationToken":
				if token != "" {
					query.Set(name, token)
				}
			case known:
				query.Set(name, v)
			default:
				t.Fatalf("the guide names the parameter %q, which this test has no value for", name)
			}
		}
		rawURL := srv.RootURL + path + "?" + query.Encode()
		auth, err := hawk.RequestHeader(hawk.Credentials{ID: srv.ClientID, Key: srv.Token}, method, rawURL, time.Now(), "", "", "")
		require.NoError(t, err)
		req, err := http.NewRequest(method, rawURL, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", method, rawURL, body)
		var reply map[string]any
		require.NoError(t, json.Unmarshal(body, &reply))
		return reply
	}
	// The reply's shape as the guide shows it: tasks of {status, task},
	// and a continuationToken while more match.
	first := call("")
	tasks, ok := first["tasks"].([]any)
	require.True(t, ok, "%v", first)
	require.Len(t, tasks, 1)
	require.Contains(t, lines[1], `"tasks": [{"status": {…}, "task": {…}}, …], "continuationToken"`)
	member := tasks[0].(map[string]any)
	require.Contains(t, member, "task")
	require.Equal(t, failed[1], member["status"].(map[string]any)["taskId"], "newest first")
	token, _ := first["continuationToken"].(string)
	require.NotEmpty(t, token)
	second := call(token)["tasks"].([]any)
	require.Len(t, second, 1)
	require.Equal(t, failed[0], second[0].(map[string]any)["status"].(map[string]any)["taskId"])
}
