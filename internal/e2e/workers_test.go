package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestWorkerListShowsLiveness: hopper's worker, with two slots, asks for
// both when idle, so the queue records its capacity; running one task it
// is online with one busy slot, in `hopper worker list`, /metrics and
// getWorker (with the task it runs); stopped with SIGTERM, it resolves
// its run and holds nothing, so it never looks busy once gone.
func TestWorkerListShowsLiveness(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	const queue = "e2e-live/wt"
	w := e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: queue, WorkerID: "w-live", Capacity: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	id := tcclient.NewTaskID()
	payload, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", "sleep 120"}}, "maxRunTime": 300})
	require.NoError(t, err)
	now := time.Now()
	_, err = root.CreateTask(ctx, id, &tcclient.TaskDefinition{TaskQueueID: queue, Created: tcclient.NewTime(now),
		Deadline: tcclient.NewTime(now.Add(time.Hour)), Payload: payload,
		Metadata: tcclient.TaskMetadata{Name: "long", Description: "liveness e2e", Owner: "e2e@example.com", Source: "https://example.com/e2e"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := root.Status(ctx, id)
		require.NoError(t, err)
		return st.State == tcclient.StateRunning
	}, time.Minute, 100*time.Millisecond)

	env := srv.Env()
	out, errOut, code := hopperCLI(t, env, "worker", "list", queue)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, regexp.MustCompile(`(?m)^e2e/w-live\s+online\s+1\s+2\s+\S+ ago\s+`+id), out)

	metrics := func() string {
		resp, err := http.Get(srv.RootURL + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	text := metrics()
	for _, line := range []string{
		`hopper_workers_online{task_queue_id="e2e-live/wt"} 1`,
		`hopper_workers_capacity{task_queue_id="e2e-live/wt"} 2`,
		`hopper_workers_busy{task_queue_id="e2e-live/wt"} 1`,
	} {
		require.Contains(t, text, line+"\n")
	}

	var worker struct {
		Busy         int `json:"busy"`
		RunningTasks []struct {
			TaskID string `json:"taskId"`
		} `json:"runningTasks"`
	}
	require.NoError(t, root.Do(ctx, http.MethodGet, "/provisioners/e2e-live/worker-types/wt/workers/e2e/w-live", nil, nil, &worker))
	require.Equal(t, 1, worker.Busy)
	require.Len(t, worker.RunningTasks, 1)
	require.Equal(t, id, worker.RunningTasks[0].TaskID)

	require.NoError(t, w.Signal(syscall.SIGTERM))
	select {
	case <-w.Done():
	case <-time.After(time.Minute):
		t.Fatal("the worker did not stop")
	}
	out, errOut, code = hopperCLI(t, env, "worker", "list", queue)
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.Contains(out, "e2e/w-live") && regexp.MustCompile(`e2e/w-live\s+\S+\s+0\s+2\s`).MatchString(out),
		"a stopped worker holds no slot: %s", out)
	require.Contains(t, metrics(), `hopper_workers_busy{task_queue_id="e2e-live/wt"} 0`+"\n")
}
