package e2e_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// copiedTaskID reads the id `hopper task interactive` printed, from what
// the example's hopper commands recorded.
const copiedTaskID = `"$(sed -n 's/^Created interactive task \([A-Za-z0-9_-]\{22\}\) .*/\1/p' "$HOPPER_DOC_OUTPUT" | tail -n 1)"`

// TestInteractiveGuideAcrossReplicas runs docs/interactive.md's terminal
// lines as written across two replicas sharing PostgreSQL, the worker on
// B and the reader's commands on A: the interactive copy of a failed
// task, then `hopper task shell`, which waits for the copy to run and
// reaches its worker through B; typing echo $TASK_ID prints the copy's
// id.
func TestInteractiveGuideAcrossReplicas(t *testing.T) {
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

	failed := tcclient.NewTaskID()
	task := newTask(queue)
	task.Payload = json.RawMessage(`{"command": [["sh", "-c", "echo broken; exit 1"]], "maxRunTime": 60}`)
	_, err := ca.CreateTask(ctx, failed, task)
	require.NoError(t, err)
	testclock.WaitFor(t, 2*time.Minute, "the task to fail", func() bool {
		st, err := ca.Status(ctx, failed)
		return err == nil && st.State == tcclient.StateFailed
	})
	out, err := e2e.DocShell{Env: a.Env(), Replace: []string{"FAILED_TASKID", failed, "NEW_TASKID", copiedTaskID},
		Timeout: 4 * time.Minute, Stdin: "echo \"inside=$TASK_ID\"\nexit\n"}.Run(t, e2e.DocExample(t, "interactive-from-terminal"))
	require.NoError(t, err, out)
	m := regexp.MustCompile(`Created interactive task (\S+) \(a copy of`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Contains(t, out, "inside="+m[1], "the shell ran in the copy, reached through A while its worker is on B")
	_, _ = ca.CancelTask(ctx, m[1])
}
