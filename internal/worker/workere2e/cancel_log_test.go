package workere2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestQueueSideCancelsKeepTheLog: the queue's own cancels (a newer task of
// a cancelInProgress key, the first failure of a fail-fast group) resolve
// a running run exception/canceled; the worker stops it and still uploads
// what it wrote, as after cancelTask (TestCancelKillsTask).
func TestQueueSideCancelsKeepTheLog(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("cancel-log")
	flow := func(block string) func(*tcclient.TaskDefinition) {
		return func(d *tcclient.TaskDefinition) { d.Extra = json.RawMessage(`{"flow": ` + block + `}`) }
	}
	long := map[string]any{"command": [][]string{{"sh", "-c", "echo preview one is deploying; sleep 600"}}, "maxRunTime": 900}
	first := createTaskWith(t, queue, long, flow(`{"key": "preview", "cancelInProgress": true}`))
	// Two slots: the fail-fast group's failure runs beside its sibling.
	startWorkerWith(t, queue, workerOpts{id: "cancel-log", config: map[string]any{"capacity": 2}})
	waitLiveLog(t, first, "preview one is deploying")
	newer := createTaskWith(t, queue, map[string]any{"command": [][]string{{"true"}}, "maxRunTime": 60}, flow(`{"key": "preview", "cancelInProgress": true}`))

	require.Eventually(t, func() bool { return status(t, newer).State == tcclient.StateCompleted }, 60*time.Second, 50*time.Millisecond)
	st := status(t, first)
	require.Equal(t, "canceled", st.Runs[0].ReasonResolved)
	require.Eventually(t, func() bool { return uploaded(t, first) }, 30*time.Second, 50*time.Millisecond, "the cancelled run's log is uploaded")
	log := backingLog(t, first, 0)
	require.Contains(t, log, "preview one is deploying")
	require.Contains(t, log, "=== Task Stopped ===")

	// Fail fast: the failure cancels its running sibling.
	group := tcclient.NewTaskID()
	sibling := createTaskWith(t, queue, map[string]any{"command": [][]string{{"sh", "-c", "echo sibling at work; sleep 600"}}, "maxRunTime": 900},
		func(d *tcclient.TaskDefinition) { flow(`{"failFast": true}`)(d); d.TaskGroupID = group })
	waitLiveLog(t, sibling, "sibling at work")
	failing := createTaskWith(t, queue, map[string]any{"command": [][]string{{"sh", "-c", "exit 1"}}, "maxRunTime": 60},
		func(d *tcclient.TaskDefinition) { flow(`{"failFast": true}`)(d); d.TaskGroupID = group })
	require.Eventually(t, func() bool { return status(t, failing).State == tcclient.StateFailed }, 60*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return uploaded(t, sibling) }, 30*time.Second, 50*time.Millisecond, "the cancelled sibling's log is uploaded")
	require.Equal(t, "canceled", status(t, sibling).Runs[0].ReasonResolved)
	require.Contains(t, backingLog(t, sibling, 0), "sibling at work")
}

// uploaded reports whether run 0's backing log can be read: its artifact
// is created before its data is sent.
func uploaded(t *testing.T, taskID string) bool {
	t.Helper()
	red, err := shared.admin.GetArtifact(context.Background(), taskID, 0, "public/logs/live_backing.log")
	if err != nil {
		return false
	}
	resp, err := http.Get(red.URL)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
