package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestFlowControlGuide runs docs/flow-control.md's examples as written,
// each after the guide's flow function, against a server and a worker on
// hopper/default with hopper dev's capacity (2): a key's limit runs its
// deploys one after another while another task passes; a queue served
// late runs only the newest of three superseding builds; a newer preview
// cancels the running one; a failed task cancels the rest of its group.
// The flow block the guide describes is accepted by createTask.
func TestFlowControlGuide(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default", Capacity: 2})
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	function := e2e.DocExample(t, "flow-function")
	withFlow := func(name string) e2e.DocBlock {
		ex := e2e.DocExample(t, name)
		ex.Text = function.Text + ex.Text
		return ex
	}
	ids := func(out string) []string {
		var found []string
		for _, m := range regexp.MustCompile(`Task (\S+) created`).FindAllStringSubmatch(out, -1) {
			found = append(found, m[1])
		}
		return found
	}
	status := func(id string) *tcclient.TaskStatus {
		st, err := q.Status(ctx, id)
		require.NoError(t, err)
		return st
	}
	waitState := func(id, state string) *tcclient.TaskStatus {
		t.Helper()
		var st *tcclient.TaskStatus
		testclock.WaitFor(t, 2*time.Minute, id+" "+state, func() bool {
			st = status(id)
			return st.State == state
		})
		return st
	}
	sh := e2e.DocShell{Env: srv.Env()}

	// The flow block itself.
	block := filepath.Join(t.TempDir(), "task.yaml")
	require.NoError(t, os.WriteFile(block, []byte("payload: {command: [[sh, -c, \"true\"]], maxRunTime: 60}\n"+
		e2e.DocExample(t, "flow-block").Text), 0o600))
	_, errOut, code := hopperCLI(t, srv.Env(), "task", "create", "-f", block, "--task-queue-id", "guide/nobody")
	require.Equal(t, 0, code, errOut)

	// Limit: one deploy at a time, in order; the other task is not held.
	out, err := sh.Run(t, withFlow("flow-limit"))
	require.NoError(t, err, out)
	require.Contains(t, out, "not held back")
	deploys := ids(out)[:3]
	var runs []tcclient.Run
	for _, id := range deploys {
		runs = append(runs, waitState(id, tcclient.StateCompleted).Runs[0])
	}
	for i := 1; i < len(runs); i++ {
		require.False(t, runs[i].Started.Before(runs[i-1].Resolved.Time), "deploy %d started before deploy %d ended", i+1, i)
	}

	// Supersede: the builds first, then the worker the guide starts.
	lines := strings.SplitN(e2e.DocExample(t, "flow-supersede").Text, "\n", 2)
	create, worker := withFlow("flow-supersede"), e2e.DocExample(t, "flow-supersede")
	create.Text = function.Text + lines[0] + "\n"
	worker.Text = lines[1]
	out, err = sh.Run(t, create)
	require.NoError(t, err, out)
	builds := ids(out)
	require.Len(t, builds, 3)
	e2e.DocShell{Env: srv.Env(), Replace: []string{"/tmp/flow-worker", t.TempDir()}}.Start(t, worker)
	waitState(builds[2], tcclient.StateCompleted)
	for _, id := range builds[:2] {
		require.Equal(t, "superseded", waitState(id, tcclient.StateException).Runs[0].ReasonResolved)
	}

	// Cancel in progress: the running preview ends canceled.
	out, err = sh.Run(t, withFlow("flow-cancel-in-progress"))
	require.NoError(t, err, out)
	previews := ids(out)
	require.Len(t, previews, 2)
	require.Equal(t, "canceled", waitState(previews[0], tcclient.StateException).Runs[0].ReasonResolved)
	waitState(previews[1], tcclient.StateCompleted)

	// Fail fast: the first task fails, the second is cancelled.
	out, err = sh.Run(t, withFlow("flow-fail-fast"))
	require.NoError(t, err, out)
	second := ids(out)
	require.Len(t, second, 1, "the first task's line went to awk: %s", out)
	require.Equal(t, "canceled", waitState(second[0], tcclient.StateException).Runs[0].ReasonResolved)
}
