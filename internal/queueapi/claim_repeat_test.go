package queueapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestClaimTaskRepeated: a worker whose claimTask answer was lost repeats
// the call and gets the same run again with fresh credentials; any other
// worker is refused, and the repeat records nothing twice.
func TestClaimTaskRepeated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{LongPoll: 50 * time.Millisecond})
	const tq = "prov-rc/wt-rc"
	// An empty claimWork records the worker w1 (the harness's identity).
	require.Empty(t, h.claimWork(t, tq, 1))
	taskID := newTaskID()
	h.createTask(t, taskID, h.taskDef(tq, nil))
	claimPath := queuePath("/task/" + taskID + "/runs/0/claim")
	me := map[string]any{"workerGroup": "wg", "workerId": "w1"}

	var first tcclient.TaskClaim
	h.call(t, http.MethodPost, claimPath, me, &first)
	require.Equal(t, 0, first.RunID)

	h.clock.Advance(30 * time.Second)
	var again tcclient.TaskClaim
	h.call(t, http.MethodPost, claimPath, me, &again)
	require.Equal(t, first.RunID, again.RunID)
	require.Equal(t, first.TakenUntil, again.TakenUntil, "a repeat does not extend the claim")
	require.Equal(t, "w1", again.WorkerID)
	require.Equal(t, taskID, again.Status.TaskID)
	require.NotEmpty(t, again.Task.Payload)
	require.NotEmpty(t, again.Credentials.AccessToken)
	require.NotEqual(t, first.Credentials.Certificate, again.Credentials.Certificate, "fresh credentials")
	require.Len(t, again.Status.Runs, 1)
	require.Equal(t, queue.StateRunning, h.status(t, taskID).State)

	others := []struct {
		name string
		body map[string]any
	}{
		{"other worker id", map[string]any{"workerGroup": "wg", "workerId": "w2"}},
		{"other worker group", map[string]any{"workerGroup": "wg2", "workerId": "w1"}},
	}
	for _, o := range others {
		r := h.request(t, http.MethodPost, claimPath, "", o.body)
		h.requireError(t, r, http.StatusConflict, api.CodeRequestConflict, "claimTask", map[string]string{"taskId": taskID, "runId": "0"})
	}

	// The worker's recent tasks name the run once.
	var w struct {
		RecentTasks []struct {
			TaskID string `json:"taskId"`
		} `json:"recentTasks"`
	}
	h.call(t, http.MethodGet, queuePath("/provisioners/prov-rc/worker-types/wt-rc/workers/wg/w1"), nil, &w)
	require.Len(t, w.RecentTasks, 1)

	// Once resolved, even its own worker is refused.
	h.call(t, http.MethodPost, queuePath("/task/"+taskID+"/runs/0/completed"), nil, nil)
	r := h.request(t, http.MethodPost, claimPath, "", me)
	h.requireError(t, r, http.StatusConflict, api.CodeRequestConflict, "claimTask", map[string]string{"taskId": taskID, "runId": "0"})
}
