package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/flowapi"
	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestFlowOfficialClient drives flow control with the npm
// taskcluster-client and a worker that knows nothing about it: a plain
// claimWork / reportCompleted loop (e2e/node/flow.mjs).
func TestFlowOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "flow.mjs", srv.Env()...)
	t.Log(out)
	require.Contains(t, out, "ok - fail-fast: the first failure cancels the rest of the group", "the script ran to its end")
}

// createFlowTask creates a task on the superseding tests' queue running
// command, with extra.flow set to flow.
func (e *supEnv) createFlowTask(flow, command string, routes ...string) string {
	e.t.Helper()
	id := tcclient.NewTaskID()
	payload, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", command}}, "maxRunTime": 120})
	require.NoError(e.t, err)
	now := time.Now()
	_, err = e.q.CreateTask(context.Background(), id, &tcclient.TaskDefinition{
		TaskQueueID: supQueue, Routes: routes, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload: payload, Extra: json.RawMessage(`{"flow": ` + flow + `}`),
		Metadata: tcclient.TaskMetadata{Name: "flow " + flow, Description: "flow control e2e", Owner: "e2e@example.com", Source: "https://example.com/e2e"},
	})
	require.NoError(e.t, err)
	return id
}

// waitState polls until the task's last run is in state.
func (e *supEnv) waitState(taskID, state string, timeout time.Duration) *tcclient.TaskStatus {
	e.t.Helper()
	var st *tcclient.TaskStatus
	err := testclock.Poll(context.Background(), timeout, func() bool {
		var err error
		st, err = e.q.Status(context.Background(), taskID)
		require.NoError(e.t, err)
		return st.State == state
	})
	if err != nil {
		e.t.Fatalf("task %s is %s, want %s: %v", taskID, st.State, state, err)
	}
	return st
}

// flowKeys reads the flow keys endpoint with the root credentials.
func (e *supEnv) flowKeys() flowapi.Response {
	e.t.Helper()
	url := e.srv.RootURL + "/api/flow/v1/task-queues/" + supQueue + "/keys"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(e.t, err)
	header, err := hawk.RequestHeader(hawk.Credentials{ID: e.srv.ClientID, Key: e.srv.Token}, http.MethodGet, url, time.Now(), hawk.NewNonce(), "", "")
	require.NoError(e.t, err)
	req.Header.Set("Authorization", header)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	var out flowapi.Response
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// TestFlowWithHopperWorkers runs each policy with real `hopper worker`
// processes.
func TestFlowWithHopperWorkers(t *testing.T) {
	t.Parallel()
	t.Run("cancel-in-progress stops the running task", func(t *testing.T) {
		t.Parallel()
		e := newSupEnv(t)
		e2e.StartWorker(t, e.srv, e2e.WorkerOptions{})
		old := e.createFlowTask(`{"key": "preview", "cancelInProgress": true}`, "sleep 60")
		e.waitState(old, tcclient.StateRunning, 30*time.Second)
		began := time.Now()
		newer := e.createFlowTask(`{"key": "preview", "cancelInProgress": true}`, "echo newer")
		st := e.waitState(old, tcclient.StateException, 5*time.Second)
		require.Equal(t, "canceled", st.Runs[0].ReasonResolved)
		// The worker (capacity 1) runs the newer task only once it has
		// stopped the cancelled one, long before its 60 s sleep ends.
		e.waitState(newer, tcclient.StateCompleted, 30*time.Second)
		require.Less(t, time.Since(began), 30*time.Second)
		require.EqualValues(t, 1, e.flowKeys().Keys[0].Canceled)
	})
	t.Run("limit keeps runs of a key apart across workers", func(t *testing.T) {
		t.Parallel()
		e := newSupEnv(t)
		for i := range 2 {
			e2e.StartWorker(t, e.srv, e2e.WorkerOptions{WorkerID: fmt.Sprint("w", i), Capacity: 2})
		}
		var ids []string
		for range 4 {
			ids = append(ids, e.createFlowTask(`{"key": "deploy", "limit": 1}`, "sleep 1"))
		}
		statuses := e.waitResolved(ids, 90*time.Second)
		type span struct{ from, to time.Time }
		var spans []span
		for _, id := range ids {
			st := statuses[id]
			require.Equal(t, tcclient.StateCompleted, st.State, id)
			r := st.Runs[len(st.Runs)-1]
			spans = append(spans, span{r.Started.Time, r.Resolved.Time})
		}
		for i := range spans {
			for j := range spans {
				if i != j {
					overlap := spans[i].from.Before(spans[j].to) && spans[j].from.Before(spans[i].to)
					require.False(t, overlap, "runs of %s and %s overlap", ids[i], ids[j])
				}
			}
		}
	})
	t.Run("supersede runs only the newest task", func(t *testing.T) {
		t.Parallel()
		e := newSupEnv(t)
		var ids []string
		for i := range 3 {
			ids = append(ids, e.createFlowTask(`{"supersede": true}`, fmt.Sprint("echo run ", i), "coalesce.v1.lint"))
		}
		e2e.StartWorker(t, e.srv, e2e.WorkerOptions{})
		statuses := e.waitResolved(ids, 60*time.Second)
		require.Equal(t, tcclient.StateCompleted, statuses[ids[2]].State)
		for _, id := range ids[:2] {
			require.Equal(t, tcclient.ReasonSuperseded, statuses[id].Runs[0].ReasonResolved, id)
			var by struct {
				TaskID string `json:"taskId"`
				RunID  int    `json:"runId"`
			}
			require.NoError(t, json.Unmarshal(e.artifact(id, 0, "public/superseded-by.json"), &by))
			require.Equal(t, ids[2], by.TaskID)
		}
		log := e.taskLog(ids[2], 0)
		require.Contains(t, log, "run 2")
		keys := e.flowKeys().Keys
		require.Len(t, keys, 1)
		require.Equal(t, flowapi.Key{Key: "lint", Supersede: true, Superseded: 2}, keys[0])
	})
}

// TestFlowReplicasShareOnePostgres runs a limited key across two `hopper
// serve` processes on one database, with plain claimWork/reportCompleted
// loops on both: the key never has more runs than its limit, every task
// runs once, and a run ending on one replica wakes claims waiting on the
// other (a claimWork at the limit waits rather than polls).
func TestFlowReplicasShareOnePostgres(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	args := []string{"--db", db, "--claim-timeout", "10m"}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	clients := []*tcclient.Client{
		rootClient(e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})),
		rootClient(e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		q     = "replicas/flow"
		tasks = 30
		limit = 2
	)
	for i := range tasks {
		def := newTask(q)
		def.Extra = json.RawMessage(fmt.Sprintf(`{"flow": {"key": "deploy", "limit": %d}}`, limit))
		_, err := clients[i%2].CreateTask(ctx, tcclient.NewTaskID(), def)
		require.NoError(t, err)
	}
	var (
		running, peak, done atomic.Int64
		seen                sync.Map
		wg                  sync.WaitGroup
		failures            = make(chan error, 64)
	)
	for w := range 6 {
		wg.Go(func() {
			c := clients[w%2]
			for done.Load() < tasks && ctx.Err() == nil {
				res, err := c.ClaimWork(ctx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: fmt.Sprint("w", w), Tasks: 2})
				if err != nil {
					if done.Load() < tasks {
						failures <- err
					}
					return
				}
				for _, cl := range res.Tasks {
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					if _, dup := seen.LoadOrStore(cl.Status.TaskID, true); dup {
						failures <- fmt.Errorf("task %s claimed twice", cl.Status.TaskID)
					}
					time.Sleep(20 * time.Millisecond)
					running.Add(-1) // before the report: never over-counts
					if _, err := c.ReportCompleted(ctx, cl.Status.TaskID, cl.RunID); err != nil {
						failures <- err
					}
					if done.Add(1) == tasks {
						cancel() // ends the other claimers' long-polls
					}
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		require.NoError(t, err)
	}
	require.EqualValues(t, tasks, done.Load())
	require.LessOrEqual(t, peak.Load(), int64(limit))
	t.Logf("%d tasks of one key with limit %d ran through 6 claimers on 2 replicas; at most %d at once", tasks, limit, peak.Load())
}
