package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestReadmeTour runs the README's five-minute tour as written against a
// server and a worker on hopper/default: the task commands (a task that
// says hello, one that fails, then status, log and artifacts of the last
// one), the dependent task b.yaml after a task A, and the pipeline file
// created and watched to its end.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default"})
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// The task commands; the second fails on purpose, so every line runs.
	out, err := e2e.DocShell{Dir: dir, Env: srv.Env(), KeepGoing: true, Replace: []string{"<taskId>", "$(last_task_id)"}}.
		Run(t, e2e.DocExample(t, "readme-task-commands"))
	require.NoError(t, err, out)
	require.Regexp(t, `(?m)^hello$`, out)
	require.Contains(t, out, `"state": "failed"`, "status --json of the failed task")
	require.Contains(t, out, "public/logs/live_backing.log", "its artifacts")

	// b.yaml runs after a task A.
	a := tcclient.NewTaskID()
	payload, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", "echo A"}}, "maxRunTime": 60})
	require.NoError(t, err)
	now := time.Now()
	_, err = q.CreateTask(ctx, a, &tcclient.TaskDefinition{TaskQueueID: "hopper/default", Created: tcclient.NewTime(now),
		Deadline: tcclient.NewTime(now.Add(time.Hour)), Payload: payload,
		Metadata: tcclient.TaskMetadata{Name: "a", Description: "A", Owner: "me@example.com", Source: "https://example.com"}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(e2e.DocExample(t, "readme-b-yaml").Replace(t, "<taskId of A>", a)), 0o600))
	out, err = e2e.DocShell{Dir: dir, Env: srv.Env()}.Run(t, e2e.DocExample(t, "readme-create-b"))
	require.NoError(t, err, out)
	b := regexp.MustCompile(`Task (\S+) created`).FindStringSubmatch(out)
	require.NotNil(t, b, out)
	testclock.WaitFor(t, 2*time.Minute, "b completes after A", func() bool {
		st, err := q.Status(ctx, b[1])
		return err == nil && st.State == tcclient.StateCompleted
	})

	// The pipeline, created and watched until every step completed.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(e2e.DocExample(t, "readme-pipeline").Text), 0o600))
	out, err = e2e.DocShell{Dir: dir, Env: srv.Env(), Replace: []string{"<taskGroupId>", "$(last_task_group_id)"}}.
		Run(t, e2e.DocExample(t, "readme-pipeline-commands"))
	require.NoError(t, err, out)
	require.Regexp(t, `3/3 resolved \(unscheduled 0, pending 0, running 0, completed 3`, out)
}
