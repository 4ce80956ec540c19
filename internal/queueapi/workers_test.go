package queueapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// workerView is the part of getWorker and listWorkers' entries that says
// whether a worker is online and busy.
type workerView struct {
	WorkerID       string     `json:"workerId"`
	LastDateActive queue.Time `json:"lastDateActive"`
	Online         bool       `json:"online"`
	Capacity       int        `json:"capacity"`
	Busy           int        `json:"busy"`
	RunningTasks   []struct {
		TaskID     string     `json:"taskId"`
		RunID      int        `json:"runId"`
		Started    queue.Time `json:"started"`
		TakenUntil queue.Time `json:"takenUntil"`
	} `json:"runningTasks"`
}

// TestWorkerLiveness follows a worker through its day as getWorker,
// listWorkers and /metrics tell it: asking for three tasks it gets two
// (online, capacity 3, busy 2); silent for minutes but reclaiming (online:
// a reclaim is its heartbeat, and it holds a run); idle (online, busy 0);
// gone (offline). A worker that died holding a run looks busy only until
// the run's claim runs out, never after.
func TestWorkerLiveness(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{Metrics: true})
	const tq = "prov-live/wt"
	a, b, c := newTaskID(), newTaskID(), newTaskID()
	h.createTask(t, a, h.taskDef(tq, nil))
	h.createTask(t, b, h.taskDef(tq, nil))
	require.Len(t, h.claimWork(t, tq, 3), 2)
	claimed := h.clock.Now()

	worker := func(id string) workerView {
		t.Helper()
		var w workerView
		h.call(t, http.MethodGet, queuePath("/provisioners/prov-live/worker-types/wt/workers/wg/"+id), nil, &w)
		var list struct{ Workers []workerView }
		h.call(t, http.MethodGet, queuePath("/provisioners/prov-live/worker-types/wt/workers"), nil, &list)
		for _, e := range list.Workers {
			if e.WorkerID == id {
				require.Equal(t, [3]any{w.Online, w.Capacity, w.Busy}, [3]any{e.Online, e.Capacity, e.Busy}, "listWorkers says what getWorker says")
				return w
			}
		}
		t.Fatalf("listWorkers does not list %s", id)
		return w
	}
	metrics := func() string {
		t.Helper()
		r := h.request(t, http.MethodGet, "/metrics", "", nil)
		require.Equal(t, http.StatusOK, r.status)
		var out []string
		for _, line := range strings.Split(string(r.body), "\n") {
			if strings.HasPrefix(line, "hopper_workers_") && strings.Contains(line, tq) {
				out = append(out, line[len("hopper_workers_"):strings.Index(line, "{")]+" "+line[strings.LastIndex(line, " ")+1:])
			}
		}
		return strings.Join(out, ", ")
	}

	w := worker("w1")
	require.True(t, w.Online)
	require.Equal(t, 3, w.Capacity, "the most tasks it asked for at once")
	require.Equal(t, 2, w.Busy)
	require.Len(t, w.RunningTasks, 2)
	for _, r := range w.RunningTasks {
		require.Contains(t, []string{a, b}, r.TaskID)
		require.True(t, r.Started.Equal(claimed))
		require.True(t, r.TakenUntil.After(claimed))
	}
	require.Equal(t, "busy 2, capacity 3, online 1", metrics())

	// Minutes later, silent but for a reclaim: still online, and seen.
	h.clock.Advance(5 * time.Minute)
	h.call(t, http.MethodPost, queuePath("/task/"+a+"/runs/0/reclaim"), nil, nil)
	h.call(t, http.MethodPost, queuePath("/task/"+b+"/runs/0/completed"), nil, nil)
	w = worker("w1")
	require.True(t, w.Online, "a worker holding a run is online")
	require.True(t, w.LastDateActive.Equal(h.clock.Now()), "the reclaim counts as seen: %s", w.LastDateActive)
	require.Equal(t, 1, w.Busy)
	require.Equal(t, a, w.RunningTasks[0].TaskID)
	require.Equal(t, "busy 1, capacity 3, online 1", metrics())

	// Done, and soon asking again; then gone.
	h.clock.Advance(30 * time.Second)
	h.call(t, http.MethodPost, queuePath("/task/"+a+"/runs/0/completed"), nil, nil)
	w = worker("w1")
	require.True(t, w.Online, "seen 30 s ago")
	require.Equal(t, 0, w.Busy)
	require.Empty(t, w.RunningTasks)
	h.clock.Advance(2 * time.Minute)
	w = worker("w1")
	require.False(t, w.Online, "a worker unseen for two minutes, holding nothing, is offline")
	require.Equal(t, 3, w.Capacity)
	require.Equal(t, "busy 0, capacity 0, online 0", metrics())

	// w2 claims a task and dies: busy while its claim lasts, then neither
	// busy nor online, though the run is still running until the queue's
	// claim expirer resolves it.
	h.createTask(t, c, h.taskDef(tq, nil))
	var got tcclient.ClaimWorkResponse
	h.call(t, http.MethodPost, queuePath("/claim-work/"+tcclient.EscapePathParam(tq)),
		map[string]any{"workerGroup": "wg", "workerId": "w2", "tasks": 1}, &got)
	require.Len(t, got.Tasks, 1)
	h.clock.Advance(10 * time.Minute)
	w = worker("w2")
	require.True(t, w.Online, "its claim lasts")
	require.Equal(t, 1, w.Busy)
	h.clock.Advance(10*time.Minute + time.Second)
	require.Equal(t, queue.StateRunning, h.status(t, c).State)
	w = worker("w2")
	require.False(t, w.Online, "a worker whose claims ran out is offline")
	require.Equal(t, 0, w.Busy, "and not busy")
	require.Empty(t, w.RunningTasks)
	require.Equal(t, "busy 0, capacity 0, online 0", metrics())
}
