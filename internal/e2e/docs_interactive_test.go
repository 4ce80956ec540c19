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

// TestInteractiveGuide runs docs/interactive.md's examples as written,
// across two replicas sharing PostgreSQL (the worker on B, the reader's
// commands on A): the role that lets people debug a queue, the
// interactive copy of a failed task and a shell in it (typing echo
// $TASK_ID prints the copy's id), and the payload with its keep-alive
// (the queue accepts it and a worker runs it).
func TestInteractiveGuide(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	db := e2e.FreshPostgres(t)
	args := []string{"--db", db}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	const queue = "proj-ci/linux"
	e2e.StartWorker(t, b, e2e.WorkerOptions{TaskQueueID: queue})
	ca := rootClient(a)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	out, err := e2e.DocShell{Env: a.Env()}.Run(t, e2e.DocExample(t, "interactive-role"))
	require.NoError(t, err, out)
	require.Contains(t, out, "project:ci-debuggers", out)

	failed := tcclient.NewTaskID()
	task := newTask(queue)
	task.Payload = json.RawMessage(`{"command": [["sh", "-c", "echo broken; exit 1"]], "maxRunTime": 60}`)
	_, err = ca.CreateTask(ctx, failed, task)
	require.NoError(t, err)
	testclock.WaitFor(t, 2*time.Minute, "the task to fail", func() bool {
		st, err := ca.Status(ctx, failed)
		return err == nil && st.State == tcclient.StateFailed
	})
	out, err = e2e.DocShell{Env: a.Env(), Replace: []string{"FAILED_TASKID", failed}, Timeout: 4 * time.Minute,
		Stdin: "echo \"inside=$TASK_ID\"\nexit\n"}.Run(t, e2e.DocExample(t, "interactive-cli"))
	require.NoError(t, err, out)
	m := regexp.MustCompile(`Created interactive task (\S+) \(a copy of`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Contains(t, out, "inside="+m[1], "the shell ran in the copy, reached through A while its worker is on B")
	_, _ = ca.CancelTask(ctx, m[1])

	dir := t.TempDir()
	doc := "taskQueueId: " + queue + "\nmetadata: {name: guide, description: keep-alive, owner: me@example.com, source: https://example.com}\n" +
		e2e.DocExample(t, "interactive-payload").Replace(t, "make test", "exit 1")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.yaml"), []byte(doc), 0o600))
	out, err = e2e.DocShell{Dir: dir, Env: a.Env()}.Run(t, e2e.DocBlock{Name: "interactive-payload", Lang: "sh", Text: "hopper task create -f task.yaml\n"})
	require.NoError(t, err, out)
	id := regexp.MustCompile(`Task (\S+) created`).FindStringSubmatch(out)
	require.NotNil(t, id, out)
	testclock.WaitFor(t, 2*time.Minute, "the interactive task to run", func() bool {
		st, err := ca.Status(ctx, id[1])
		return err == nil && st.State == tcclient.StateRunning
	})
	_, err = ca.CancelTask(ctx, id[1])
	require.NoError(t, err)
}
