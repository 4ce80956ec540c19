package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/superseder"
	"github.com/hopper-ci/hopper/internal/supersederapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
)

// The superseding end-to-end tests run real `hopper serve` and `hopper
// worker` processes (docs/contract/worker.md §5, docs/contract/queue.md §8).

const supQueue = "e2e/worker"

type supEnv struct {
	t   *testing.T
	srv *e2e.Server
	q   *tcclient.Client
}

func newSupEnv(t *testing.T, serveArgs ...string) *supEnv {
	t.Helper()
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: serveArgs})
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	return &supEnv{t: t, srv: srv, q: q}
}

// builtinURL is the built-in superseder's URL for key with zero thresholds.
func (e *supEnv) builtinURL(key string) string {
	return e.srv.RootURL + "/api/superseder/v1/list/0/0/" + key
}

// createTasks creates n tasks opting in under key, created one second
// apart (oldest first), each echoing its index after sleeping. They are
// pending at once unless they depend on deps.
func (e *supEnv) createTasks(n int, key, supersederURL string, sleep time.Duration, deps ...string) []string {
	e.t.Helper()
	base := time.Now().Add(-time.Duration(n+1) * time.Second)
	ids := make([]string, n)
	for i := range n {
		ids[i] = tcclient.NewTaskID()
		payload, err := json.Marshal(map[string]any{
			"command":       [][]string{{"sh", "-c", fmt.Sprintf("sleep %g; echo ran-task-%d", sleep.Seconds(), i)}},
			"maxRunTime":    120,
			"supersederUrl": supersederURL,
		})
		require.NoError(e.t, err)
		created := base.Add(time.Duration(i) * time.Second)
		_, err = e.q.CreateTask(context.Background(), ids[i], &tcclient.TaskDefinition{
			TaskQueueID: supQueue, Routes: []string{superseder.RoutePrefix + key}, Dependencies: deps,
			Created: tcclient.NewTime(created), Deadline: tcclient.NewTime(created.Add(time.Hour)),
			Payload:  payload,
			Metadata: tcclient.TaskMetadata{Name: fmt.Sprintf("sup %s %d", key, i), Description: "superseding e2e", Owner: "e2e@example.com", Source: "https://example.com/e2e"},
		})
		require.NoError(e.t, err)
	}
	return ids
}

const gateQueue = "e2e/gate"

// gateTask creates a task on a queue no worker serves; tasks depending on
// it become pending together when openGate completes it.
func (e *supEnv) gateTask() string {
	e.t.Helper()
	id := tcclient.NewTaskID()
	now := time.Now()
	_, err := e.q.CreateTask(context.Background(), id, &tcclient.TaskDefinition{
		TaskQueueID: gateQueue, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload:  json.RawMessage(`{}`),
		Metadata: tcclient.TaskMetadata{Name: "gate", Description: "releases the tasks that depend on it", Owner: "e2e@example.com", Source: "https://example.com/e2e"},
	})
	require.NoError(e.t, err)
	return id
}

func (e *supEnv) openGate(gate string) {
	e.t.Helper()
	ctx := context.Background()
	resp, err := e.q.ClaimWork(ctx, gateQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "gate", WorkerID: "keeper", Tasks: 1})
	require.NoError(e.t, err)
	require.Len(e.t, resp.Tasks, 1)
	require.Equal(e.t, gate, resp.Tasks[0].Status.TaskID)
	creds := resp.Tasks[0].Credentials
	_, err = e.q.WithCredentials(&creds).ReportCompleted(ctx, gate, 0)
	require.NoError(e.t, err)
}

// waitPolling waits until the queue has seen a claimWork call from every
// named worker (the queue records a worker at the start of each call), so
// each is inside a long-poll or about to start the next one.
func (e *supEnv) waitPolling(workerIDs ...string) {
	e.t.Helper()
	for _, id := range workerIDs {
		e2e.WaitPolling(e.t, e.q, supQueue, "e2e", id)
	}
}

// waitResolved polls until every task is resolved and returns the
// statuses.
func (e *supEnv) waitResolved(ids []string, timeout time.Duration) map[string]*tcclient.TaskStatus {
	e.t.Helper()
	out := map[string]*tcclient.TaskStatus{}
	err := testclock.Poll(context.Background(), timeout, func() bool {
		for _, id := range ids {
			if out[id] != nil {
				continue
			}
			st, err := e.q.Status(context.Background(), id)
			require.NoError(e.t, err)
			switch st.State {
			case tcclient.StateCompleted, tcclient.StateFailed, tcclient.StateException:
				out[id] = st
			}
		}
		return len(out) == len(ids)
	})
	if err != nil {
		for _, id := range ids {
			if out[id] == nil {
				st, _ := e.q.Status(context.Background(), id)
				e.t.Logf("unresolved %s: %+v", id, st)
			}
		}
		e.t.Fatalf("%d of %d tasks resolved: %v", len(out), len(ids), err)
	}
	return out
}

// artifact returns an artifact's bytes.
func (e *supEnv) artifact(taskID string, runID int, name string) []byte {
	e.t.Helper()
	red, err := e.q.GetArtifact(context.Background(), taskID, runID, name)
	require.NoError(e.t, err, "%s on %s/%d", name, taskID, runID)
	resp, err := http.Get(red.URL)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return b
}

func (e *supEnv) artifactJSON(taskID string, runID int, name string, v any) {
	e.t.Helper()
	all, err := e.q.AllArtifacts(context.Background(), taskID, runID)
	require.NoError(e.t, err)
	idx := slices.IndexFunc(all, func(a tcclient.Artifact) bool { return a.Name == name })
	require.GreaterOrEqual(e.t, idx, 0, "artifact %s on %s/%d", name, taskID, runID)
	require.Equal(e.t, tcclient.StorageS3, all[idx].StorageType)
	require.Equal(e.t, "application/json", all[idx].ContentType)
	b := e.artifact(taskID, runID, name)
	require.NoError(e.t, json.Unmarshal(b, v), string(b))
}

func (e *supEnv) artifactNames(taskID string, runID int) []string {
	e.t.Helper()
	all, err := e.q.AllArtifacts(context.Background(), taskID, runID)
	require.NoError(e.t, err)
	var names []string
	for _, a := range all {
		names = append(names, a.Name)
	}
	return names
}

func (e *supEnv) taskLog(taskID string, runID int) string {
	e.t.Helper()
	return string(e.artifact(taskID, runID, "public/logs/live_backing.log"))
}

// requireSuperseded checks that every secondary has exactly one run ended
// exception/superseded with public/superseded-by.json naming primary, and
// that the primary completed once and lists exactly them.
func (e *supEnv) requireSuperseded(st map[string]*tcclient.TaskStatus, primary string, secondaries []string) {
	e.t.Helper()
	p := st[primary]
	require.Equal(e.t, tcclient.StateCompleted, p.State, "primary %s", primary)
	require.Len(e.t, p.Runs, 1, "primary ran once")
	for _, s := range secondaries {
		require.Len(e.t, st[s].Runs, 1, "secondary %s has one run", s)
		r := st[s].Runs[0]
		require.Equal(e.t, tcclient.StateException, r.State, "secondary %s", s)
		require.Equal(e.t, tcclient.ReasonSuperseded, r.ReasonResolved, "secondary %s", s)
		var by superseding.TaskRef
		e.artifactJSON(s, 0, superseding.SupersededByArtifact, &by)
		require.Equal(e.t, superseding.TaskRef{TaskID: primary, RunID: 0}, by, "superseded-by of %s", s)
	}
	var list []superseding.TaskRef
	e.artifactJSON(primary, 0, superseding.SupersedesArtifact, &list)
	want := make([]superseding.TaskRef, 0, len(secondaries))
	for _, s := range secondaries {
		want = append(want, superseding.TaskRef{TaskID: s, RunID: 0})
	}
	require.Equal(e.t, want, list, "supersedes of %s", primary)
}

// TestSupersedingNewestRuns: six pending tasks share a key while no worker
// runs; one worker starts and exactly the newest runs, the five others end
// superseded. The second case uses a superseder answering newest first
// (docker-worker style) with superseding.order descending: same outcome.
func TestSupersedingNewestRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		order string
	}{
		{name: "built-in superseder, ascending", order: superseding.Ascending},
		{name: "newest-first superseder, descending", order: superseding.Descending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newSupEnv(t)
			key := "build.linux"
			url := e.builtinURL(key)
			var (
				mu       sync.Mutex
				requests []string
			)
			if tt.order == superseding.Descending {
				// A dw-era service: the built-in list, reversed.
				rev := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					requests = append(requests, r.URL.RawQuery)
					mu.Unlock()
					resp, err := http.Get(e.builtinURL(key) + "?" + r.URL.RawQuery)
					if err != nil {
						http.Error(w, err.Error(), http.StatusBadGateway)
						return
					}
					defer resp.Body.Close()
					var a supersederapi.Answer
					if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
						http.Error(w, err.Error(), http.StatusBadGateway)
						return
					}
					slices.Reverse(a.Supersedes)
					_ = json.NewEncoder(w).Encode(a)
				}))
				t.Cleanup(rev.Close)
				url = rev.URL + "/coalesce/build.linux"
			}
			ids := e.createTasks(6, key, url, time.Second)
			wopts := e2e.WorkerOptions{} // ascending is the default
			if tt.order == superseding.Descending {
				wopts.Args = []string{"--superseding-order", "descending"}
			}
			e2e.StartWorker(t, e.srv, wopts)
			st := e.waitResolved(ids, 90*time.Second)
			newest := ids[5]
			e.requireSuperseded(st, newest, ids[:5])
			log := e.taskLog(newest, 0)
			require.Contains(t, log, "ran-task-5")
			require.Contains(t, log, "task "+newest+" (run 0) supersedes it and runs instead")
			if tt.order == superseding.Descending {
				mu.Lock()
				defer mu.Unlock()
				require.Equal(t, []string{"taskId=" + ids[0]}, requests, "one superseder call, for the initial task")
			}
		})
	}
}

// TestSupersedingRacingWorkers: two workers race over overlapping lists;
// every task ends exactly once and none runs twice.
func TestSupersedingRacingWorkers(t *testing.T) {
	t.Parallel()
	e := newSupEnv(t)
	key := "race"
	// The tasks wait for a gate task, so that all become pending in one
	// step while both workers are already long-polling: each worker gets
	// one of them from claimWork and both claim from overlapping lists.
	gate := e.gateTask()
	ids := e.createTasks(8, key, e.builtinURL(key), time.Second, gate)
	e2e.StartWorker(t, e.srv, e2e.WorkerOptions{WorkerID: "racer-1"})
	e2e.StartWorker(t, e.srv, e2e.WorkerOptions{WorkerID: "racer-2"})
	e.waitPolling("racer-1", "racer-2")
	e.openGate(gate)
	st := e.waitResolved(ids, 120*time.Second)

	byPrimary := map[string][]string{}
	var primaries []string
	for _, id := range ids {
		require.Len(t, st[id].Runs, 1, "task %s has exactly one run", id)
		r := st[id].Runs[0]
		switch {
		case r.State == tcclient.StateCompleted:
			primaries = append(primaries, id)
		case r.State == tcclient.StateException && r.ReasonResolved == tcclient.ReasonSuperseded:
			var by superseding.TaskRef
			e.artifactJSON(id, 0, superseding.SupersededByArtifact, &by)
			byPrimary[by.TaskID] = append(byPrimary[by.TaskID], id)
		default:
			t.Fatalf("task %s ended %s/%s", id, r.State, r.ReasonResolved)
		}
	}
	t.Logf("primaries %v; superseded by each: %v", primaries, byPrimary)
	require.NotEmpty(t, primaries)
	require.LessOrEqual(t, len(primaries), 2, "each worker ran at most one primary per claim it got first")
	listed := map[string]bool{}
	for _, p := range primaries {
		require.Contains(t, e.taskLog(p, 0), "ran-task-")
		secs := byPrimary[p]
		if len(secs) == 0 {
			require.NotContains(t, e.artifactNames(p, 0), superseding.SupersedesArtifact)
			continue
		}
		e.requireSuperseded(st, p, secs)
		for _, s := range secs {
			require.False(t, listed[s], "%s superseded twice", s)
			listed[s] = true
		}
	}
	for p := range byPrimary {
		require.Contains(t, primaries, p, "superseded-by names a task that ran")
	}
	require.Len(t, listed, len(ids)-len(primaries), "every other task was superseded exactly once")
}

// TestSupersedingSupersederFailures: an unreachable, slow, garbage-answering
// or initial-task-omitting superseder makes the initial task run alone, and
// its log says why.
func TestSupersedingSupersederFailures(t *testing.T) {
	t.Parallel()
	e := newSupEnv(t)
	var (
		mu      sync.Mutex
		partner = map[string]string{}
	)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<html>coalescer is down for maintenance</html>")
	}))
	t.Cleanup(garbage.Close)
	omits := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		other := partner[r.URL.Query().Get("taskId")]
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(supersederapi.Answer{Supersedes: []string{other}})
	}))
	t.Cleanup(omits.Close)
	tests := []struct {
		key, url, why string
	}{
		{key: "unreachable", url: "http://" + e2e.FreePort(t) + "/list", why: "request failed"},
		{key: "slow", url: slow.URL + "/list", why: "no answer within 1s"},
		{key: "garbage", url: garbage.URL + "/list", why: "the answer is not a JSON object"},
		{key: "omits", url: omits.URL + "/list", why: "does not contain the initial task"},
	}
	cases := map[string][]string{}
	var all []string
	for _, tt := range tests {
		ids := e.createTasks(2, tt.key, tt.url, 0)
		mu.Lock()
		partner[ids[0]], partner[ids[1]] = ids[1], ids[0]
		mu.Unlock()
		cases[tt.key] = ids
		all = append(all, ids...)
	}
	e2e.StartWorker(t, e.srv, e2e.WorkerOptions{Capacity: 2, Config: map[string]any{"superseding": map[string]any{"timeout": "1s"}}})
	st := e.waitResolved(all, 120*time.Second)
	for _, tt := range tests {
		for i, id := range cases[tt.key] {
			require.Equal(t, tcclient.StateCompleted, st[id].State, "%s task %d", tt.key, i)
			require.Len(t, st[id].Runs, 1)
			log := e.taskLog(id, 0)
			require.Contains(t, log, fmt.Sprintf("ran-task-%d", i))
			require.Contains(t, log, "Superseding skipped", "%s: %s", tt.key, log)
			require.Contains(t, log, tt.why, "%s: %s", tt.key, log)
			require.Contains(t, log, "running task "+id+" alone")
			names := e.artifactNames(id, 0)
			require.NotContains(t, names, superseding.SupersedesArtifact)
			require.NotContains(t, names, superseding.SupersededByArtifact)
		}
	}
}

// TestSupersedingLongPrimary: the primary runs longer than the claim
// timeout; its secondaries are reclaimed meanwhile and still end
// superseded, not claim-expired.
func TestSupersedingLongPrimary(t *testing.T) {
	t.Parallel()
	e := newSupEnv(t, "--claim-timeout=5s")
	key := "long"
	ids := e.createTasks(3, key, e.builtinURL(key), 13*time.Second)
	e2e.StartWorker(t, e.srv, e2e.WorkerOptions{})
	st := e.waitResolved(ids, 120*time.Second)
	e.requireSuperseded(st, ids[2], ids[:2])
	require.Contains(t, e.taskLog(ids[2], 0), "ran-task-2")
}
