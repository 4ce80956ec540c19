package superseding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/tcclient/tcclienttest"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/worker"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
)

const testQueue = "prov/wt"

// harness is a fake queue, a worker configured against it (never Run: the
// tests drive the superseding step directly) and a scriptable superseder.
type harness struct {
	t     *testing.T
	fake  *tcclienttest.Server
	admin *tcclient.Client
	w     *worker.Worker
	step  *superseding.Step

	sup      *httptest.Server
	mu       sync.Mutex
	answer   func(w http.ResponseWriter, r *http.Request)
	requests []*http.Request
}

type harnessOptions struct {
	claimTimeout time.Duration
	superseding  worker.SupersedingConfig
	stepOpts     superseding.Options
	// allow, if set, computes superseding.allowedUrlPrefixes from the
	// superseder's URL.
	allow func(supURL string) []string
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	fake := tcclienttest.New(tcclienttest.Options{ClaimTimeout: o.claimTimeout})
	t.Cleanup(fake.Close)
	h := &harness{t: t, fake: fake, admin: fake.Client(fake.AddClient("admin", "*"))}
	h.sup = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.requests = append(h.requests, r.Clone(context.Background()))
		answer := h.answer
		h.mu.Unlock()
		if answer == nil {
			http.Error(rw, "no answer scripted", http.StatusTeapot)
			return
		}
		answer(rw, r)
	}))
	t.Cleanup(h.sup.Close)
	if o.allow != nil {
		o.superseding.AllowedURLPrefixes = o.allow(h.sup.URL)
	}
	wc := fake.AddClient("worker", "queue:claim-work:"+testQueue, "queue:worker-id:wg/w1",
		"queue:claim-task:"+testQueue, "queue:get-task:*", "queue:status:*")
	w, err := worker.New(worker.Config{
		RootURL: fake.URL, Credentials: worker.CredentialsConfig{ClientID: wc.ClientID, AccessToken: wc.AccessToken},
		TaskQueueID: testQueue, WorkerGroup: "wg", WorkerID: "w1", WorkDir: t.TempDir(),
		Superseding: o.superseding,
	}, nil)
	require.NoError(t, err)
	h.w = w
	h.step = superseding.New(o.stepOpts)
	return h
}

// url is the supersederUrl every task of the harness names.
func (h *harness) url() string { return h.sup.URL + "/list/key?branch=main" }

// answerJSON scripts the superseder to answer body with status 200.
func (h *harness) answerJSON(body string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer = func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(body))
	}
}

// answerList scripts the superseder to answer the given taskIds.
func (h *harness) answerList(ids ...string) {
	if ids == nil {
		ids = []string{} // [] rather than null
	}
	b, err := json.Marshal(map[string]any{"supersedes": ids})
	require.NoError(h.t, err)
	h.answerJSON(string(b))
}

func (h *harness) supersederRequests() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*http.Request(nil), h.requests...)
}

// createTask creates a pending task of the queue naming supersederURL.
func (h *harness) createTask(taskQueueID, supersederURL string) string {
	h.t.Helper()
	id := tcclient.NewTaskID()
	now := time.Now()
	payload, err := json.Marshal(map[string]any{"command": [][]string{{"true"}}, "maxRunTime": 60, "supersederUrl": supersederURL})
	require.NoError(h.t, err)
	_, err = h.admin.CreateTask(context.Background(), id, &tcclient.TaskDefinition{
		TaskQueueID: taskQueueID, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Expires: tcclient.NewTime(now.Add(48 * time.Hour)), Payload: payload,
		Metadata: tcclient.TaskMetadata{Name: "t", Description: "d", Owner: "o@example.com", Source: "https://example.com"},
	})
	require.NoError(h.t, err)
	return id
}

// claimInitial claims the oldest pending task as claimWork would hand it
// to the worker and holds it.
func (h *harness) claimInitial() *worker.Claim {
	h.t.Helper()
	resp, err := h.w.Queue().ClaimWork(context.Background(), testQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "w1", Tasks: 1})
	require.NoError(h.t, err)
	require.Len(h.t, resp.Tasks, 1)
	c, err := h.w.HoldClaim(resp.Tasks[0])
	require.NoError(h.t, err)
	h.t.Cleanup(c.StopReclaiming)
	return c
}

// claimElsewhere claims a task's pending run 0 as another worker.
func (h *harness) claimElsewhere(taskID string) *tcclient.TaskClaim {
	h.t.Helper()
	tc, err := h.admin.ClaimTask(context.Background(), taskID, 0, &tcclient.ClaimTaskRequest{WorkerGroup: "other", WorkerID: "w9"})
	require.NoError(h.t, err)
	return tc
}

// supersede runs the step for the initial claim; secondaries left
// unfinished by the test are released at cleanup.
func (h *harness) supersede(initial *worker.Claim, url string) superseding.Result {
	h.t.Helper()
	res, err := h.step.Run(context.Background(), h.w.SupersedingRequest(initial, url))
	require.NoError(h.t, err)
	if res.Primary != nil {
		h.t.Cleanup(res.Primary.StopReclaiming)
	}
	if res.Secondaries != nil {
		primary := res.Primary
		if primary == nil {
			primary = initial
		}
		h.t.Cleanup(func() { res.Secondaries.Finish(context.Background(), primary, superseding.Outcome{Lost: true}) })
	}
	return res
}

func (h *harness) run0(taskID string) tcclient.Run {
	h.t.Helper()
	st, ok := h.fake.Status(taskID)
	require.True(h.t, ok, taskID)
	return st.Runs[0]
}

func (h *harness) requireRunState(taskID, state, reason string) {
	h.t.Helper()
	r := h.run0(taskID)
	require.Equal(h.t, state, r.State, "task %s run 0", taskID)
	require.Equal(h.t, reason, r.ReasonResolved, "task %s run 0", taskID)
}

// artifactJSON returns an artifact's decoded body after checking how it
// was stored (docs/contract/worker.md §5.7).
func (h *harness) artifactJSON(taskID string, runID int, name string, v any) {
	h.t.Helper()
	a, ok := h.fake.Artifacts(taskID, runID)[name]
	require.True(h.t, ok, "artifact %s on %s/%d", name, taskID, runID)
	require.Equal(h.t, tcclient.StorageS3, a.StorageType)
	require.Equal(h.t, "application/json", a.ContentType)
	require.Equal(h.t, "application/json", a.UploadContentType)
	require.Empty(h.t, a.ContentEncoding)
	require.True(h.t, a.Uploaded)
	st, _ := h.fake.Status(taskID)
	require.Equal(h.t, st.Expires.Time, a.Expires.Time, "expires with the task")
	require.NoError(h.t, json.Unmarshal(a.Content, v), string(a.Content))
}

// TestSupersedeSeedExample plays the seeds' example under both orders: the
// newest task is taken by another worker, so the middle one becomes the
// primary and supersedes the initial task.
func TestSupersedeSeedExample(t *testing.T) {
	t.Parallel()
	for _, order := range []string{superseding.Ascending, superseding.Descending} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{superseding: worker.SupersedingConfig{Order: order}})
			t0 := h.createTask(testQueue, h.url())
			mid := h.createTask(testQueue, h.url())
			newest := h.createTask(testQueue, h.url())
			initial := h.claimInitial()
			require.Equal(t, t0, initial.TaskID)
			h.claimElsewhere(newest)
			if order == superseding.Ascending {
				h.answerList(t0, mid, newest)
			} else {
				h.answerList(newest, mid, t0)
			}

			res := h.supersede(initial, h.url())
			require.Empty(t, res.Warnings)
			require.NotNil(t, res.Primary)
			require.Equal(t, mid, res.Primary.Ref().TaskID)
			require.Equal(t, 0, res.Primary.Ref().RunID)
			require.NotNil(t, res.Secondaries)
			logText := strings.Join(res.LogLines, "\n")
			require.Contains(t, logText, "claimed "+mid+" run 0")
			require.Contains(t, logText, newest+" skipped: its run 0 is running, not pending")
			require.Contains(t, logText, "supersedes "+t0+" (run 0)")

			reqs := h.supersederRequests()
			require.Len(t, reqs, 1, "the superseder is called once")
			require.Equal(t, t0, reqs[0].URL.Query().Get("taskId"))
			require.Equal(t, "main", reqs[0].URL.Query().Get("branch"), "existing query kept")
			require.Equal(t, "application/json", reqs[0].Header.Get("Accept"))
			require.Empty(t, reqs[0].Header.Get("Authorization"), "no credentials sent to the superseder")

			res.Secondaries.Finish(context.Background(), res.Primary, superseding.Outcome{State: tcclient.StateCompleted})
			h.requireRunState(t0, tcclient.StateException, tcclient.ReasonSuperseded)
			var by superseding.TaskRef
			h.artifactJSON(t0, 0, superseding.SupersededByArtifact, &by)
			require.Equal(t, superseding.TaskRef{TaskID: mid, RunID: 0}, by)
			var list []superseding.TaskRef
			h.artifactJSON(mid, 0, superseding.SupersedesArtifact, &list)
			require.Equal(t, []superseding.TaskRef{{TaskID: t0, RunID: 0}}, list)
			require.Equal(t, tcclient.StateRunning, h.run0(mid).State, "the worker resolves the primary itself")
			require.Equal(t, "other", h.run0(newest).WorkerGroup, "the task above the primary is left alone")
		})
	}
}

// TestSupersedeUnusableAnswers covers the §5.8 rows where T0 runs alone
// with a warning saying why, and checks nothing else was claimed.
func TestSupersedeUnusableAnswers(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	big := `{"supersedes": [], "pad": "` + strings.Repeat("x", superseding.MaxResponseBytes) + `"}`
	tests := []struct {
		name   string
		url    func(h *harness) string
		answer func(h *harness, t0, other string) func(http.ResponseWriter, *http.Request)
		want   string
	}{
		{name: "unreachable", url: func(*harness) string { return closedURL + "/list" }, want: "request failed"},
		{name: "HTTP 500", answer: status(500), want: "answered HTTP 500"},
		{name: "HTTP 404", answer: status(404), want: "answered HTTP 404"},
		{name: "slow", answer: func(*harness, string, string) func(http.ResponseWriter, *http.Request) {
			return func(rw http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(5 * time.Second):
				case <-r.Context().Done():
				}
			}
		}, want: "no answer within 300ms"},
		{name: "garbage", answer: body(`<html>not json</html>`), want: "not a JSON object"},
		{name: "wrong shape", answer: body(`{"supersedes": {"a": 1}}`), want: "not an array"},
		{name: "bad taskId", answer: func(_ *harness, t0, _ string) func(http.ResponseWriter, *http.Request) {
			return body(`{"supersedes": ["`+t0+`", "../../etc"]}`)(nil, "", "")
		}, want: "is not a taskId"},
		{name: "duplicates", answer: func(_ *harness, t0, other string) func(http.ResponseWriter, *http.Request) {
			return body(fmt.Sprintf(`{"supersedes": [%q, %q, %q]}`, t0, other, other))(nil, "", "")
		}, want: "more than once"},
		{name: "initial task left out", answer: func(_ *harness, _, other string) func(http.ResponseWriter, *http.Request) {
			return body(fmt.Sprintf(`{"supersedes": [%q]}`, other))(nil, "", "")
		}, want: "does not contain the initial task"},
		{name: "too long", answer: func(_ *harness, t0, other string) func(http.ResponseWriter, *http.Request) {
			return body(fmt.Sprintf(`{"supersedes": [%q, %q, %q]}`, t0, other, tcclient.NewTaskID()))(nil, "", "")
		}, want: "more than the worker's limit of 2"},
		{name: "too big", answer: body(big), want: "larger than"},
		{name: "redirect loop", answer: func(h *harness, _, _ string) func(http.ResponseWriter, *http.Request) {
			return func(rw http.ResponseWriter, r *http.Request) {
				http.Redirect(rw, r, h.sup.URL+"/again?"+r.URL.RawQuery, http.StatusFound)
			}
		}, want: "stopped after 3 redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Only the slow case needs a short timeout; the others must
			// not trip over a busy machine.
			timeout := 10 * time.Second
			if tt.name == "slow" {
				timeout = 300 * time.Millisecond
			}
			h := newHarness(t, harnessOptions{superseding: worker.SupersedingConfig{
				Timeout: worker.Duration{Duration: timeout}, MaxTasks: 2,
			}})
			url := h.url()
			if tt.url != nil {
				url = tt.url(h)
			}
			t0 := h.createTask(testQueue, url)
			other := h.createTask(testQueue, url)
			initial := h.claimInitial()
			if tt.answer != nil {
				a := tt.answer(h, t0, other)
				h.mu.Lock()
				h.answer = a
				h.mu.Unlock()
			}
			start := time.Now()
			res := h.supersede(initial, url)
			if tt.name == "slow" {
				require.Less(t, time.Since(start), 3*time.Second, "bounded by superseding.timeout")
			}
			require.Nil(t, res.Primary)
			require.Nil(t, res.Secondaries)
			require.Len(t, res.Warnings, 1)
			require.Contains(t, res.Warnings[0], tt.want)
			require.Contains(t, res.Warnings[0], "running task "+t0+" alone")
			require.Equal(t, tcclient.StatePending, h.run0(other).State, "nothing else claimed")
			require.Equal(t, tcclient.StateRunning, h.run0(t0).State)
		})
	}
}

func status(code int) func(*harness, string, string) func(http.ResponseWriter, *http.Request) {
	return func(*harness, string, string) func(http.ResponseWriter, *http.Request) {
		return func(rw http.ResponseWriter, _ *http.Request) { http.Error(rw, "nope", code) }
	}
}

func body(s string) func(*harness, string, string) func(http.ResponseWriter, *http.Request) {
	return func(*harness, string, string) func(http.ResponseWriter, *http.Request) {
		return func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(s))
		}
	}
}

// TestSupersedePlainRuns covers the answers and situations that mean a
// plain run without a warning.
func TestSupersedePlainRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		url      string // default: the harness superseder
		script   func(h *harness, t0, other string)
		wantLog  string
		wantCall bool
	}{
		{name: "empty list", script: func(h *harness, _, _ string) { h.answerList() }, wantLog: "nothing to supersede", wantCall: true},
		{name: "only the initial task", script: func(h *harness, t0, _ string) { h.answerList(t0) }, wantLog: "nothing to supersede", wantCall: true},
		{name: "every other claim fails", script: func(h *harness, t0, other string) {
			h.claimElsewhere(other)
			h.answerList(t0, other)
		}, wantLog: "no other listed task could be claimed", wantCall: true},
		{name: "URL fails the pattern", url: "ftp://superseder.example/list", wantLog: "not an absolute http(s) URL"},
		{name: "URL without host", url: "http:///list", wantLog: "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			url := h.url()
			if tt.url != "" {
				url = tt.url
			}
			t0 := h.createTask(testQueue, url)
			other := h.createTask(testQueue, url)
			initial := h.claimInitial()
			if tt.script != nil {
				tt.script(h, t0, other)
			}
			res := h.supersede(initial, url)
			require.Empty(t, res.Warnings)
			require.Nil(t, res.Primary)
			require.Nil(t, res.Secondaries)
			require.Contains(t, strings.Join(res.LogLines, "\n"), tt.wantLog)
			require.Equal(t, tt.wantCall, len(h.supersederRequests()) == 1)
		})
	}
}

// TestSupersedeAllowList checks superseding.allowedUrlPrefixes, including
// redirects that leave the allowed prefixes.
func TestSupersedeAllowList(t *testing.T) {
	t.Parallel()
	t.Run("URL not allowed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOptions{superseding: worker.SupersedingConfig{AllowedURLPrefixes: []string{"https://coalesce.example/"}}})
		t0 := h.createTask(testQueue, h.url())
		h.answerList(t0)
		res := h.supersede(h.claimInitial(), h.url())
		require.Len(t, res.Warnings, 1)
		require.Contains(t, res.Warnings[0], "allowed superseder URL prefixes")
		require.Empty(t, h.supersederRequests(), "not fetched")
	})
	t.Run("redirect outside the allowed prefixes", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOptions{allow: func(supURL string) []string { return []string{supURL + "/list/"} }})
		t0 := h.createTask(testQueue, h.url())
		h.mu.Lock()
		h.answer = func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, h.sup.URL+"/elsewhere", http.StatusFound)
		}
		h.mu.Unlock()
		res := h.supersede(h.claimInitial(), h.url())
		require.Len(t, res.Warnings, 1)
		require.Contains(t, res.Warnings[0], "outside the allowed superseder URL prefixes")
		require.Contains(t, res.Warnings[0], "running task "+t0+" alone")
		require.Len(t, h.supersederRequests(), 1, "the redirect target was not fetched")
	})
}

// TestSupersedeSkipsUnsuitableEntries checks the §5.3 hardening and the
// per-entry claim failures: each is only skipped, with a note.
func TestSupersedeSkipsUnsuitableEntries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	t0 := h.createTask(testQueue, h.url())
	otherQueue := h.createTask("prov/elsewhere", h.url())
	otherURL := h.createTask(testQueue, h.url()+"&x=1")
	running := h.createTask(testQueue, h.url())
	resolved := h.createTask(testQueue, h.url())
	good := h.createTask(testQueue, h.url())
	unknown := tcclient.NewTaskID()
	initial := h.claimInitial()
	h.claimElsewhere(running)
	rc := h.claimElsewhere(resolved)
	_, err := h.fake.Client(&rc.Credentials).ReportCompleted(context.Background(), resolved, 0)
	require.NoError(t, err)
	h.answerList(t0, good, otherQueue, otherURL, running, resolved, unknown)

	res := h.supersede(initial, h.url())
	require.Empty(t, res.Warnings)
	require.NotNil(t, res.Primary)
	require.Equal(t, good, res.Primary.Ref().TaskID, "the only claimable entry becomes the primary")
	logText := strings.Join(res.LogLines, "\n")
	for _, want := range []string{
		otherQueue + " skipped: it belongs to task queue prov/elsewhere",
		otherURL + " skipped: its supersederUrl differs",
		running + " skipped: its run 0 is running",
		resolved + " skipped: its run 0 is completed",
		unknown + " skipped: reading its definition failed",
		"claimed " + good + " run 0",
	} {
		require.Contains(t, logText, want)
	}
	for _, id := range []string{otherQueue, otherURL} {
		require.Equal(t, tcclient.StatePending, h.run0(id).State)
	}
	res.Secondaries.Finish(context.Background(), res.Primary, superseding.Outcome{State: tcclient.StateFailed})
	h.requireRunState(t0, tcclient.StateException, tcclient.ReasonSuperseded)
	h.requireRunState(running, tcclient.StateRunning, "")
}

// TestSupersedeLaterRuns checks which run is claimed: the last one if
// pending, or run 0 only with superseding.runIdZeroOnly (docker-worker).
func TestSupersedeLaterRuns(t *testing.T) {
	t.Parallel()
	for _, zeroOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("runIdZeroOnly=%v", zeroOnly), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{superseding: worker.SupersedingConfig{RunIDZeroOnly: zeroOnly}})
			t0 := h.createTask(testQueue, h.url())
			retried := h.createTask(testQueue, h.url())
			initial := h.claimInitial()
			rc := h.claimElsewhere(retried)
			_, err := h.fake.Client(&rc.Credentials).ReportException(context.Background(), retried, 0, tcclient.ReasonWorkerShutdown)
			require.NoError(t, err)
			h.answerList(t0, retried)
			res := h.supersede(initial, h.url())
			if zeroOnly {
				require.Nil(t, res.Primary)
				require.Contains(t, strings.Join(res.LogLines, "\n"), retried+" skipped: its pending run is run 1 and superseding.runIdZeroOnly is set")
				return
			}
			require.NotNil(t, res.Primary)
			require.Equal(t, retried, res.Primary.Ref().TaskID)
			require.Equal(t, 1, res.Primary.Ref().RunID)
		})
	}
}

// TestSupersedeOutcomes checks docs/contract/worker.md §5.6: only when the primary's task
// code concluded are the secondaries superseded; otherwise they are
// released with worker-shutdown (and retried by the queue), without
// artifacts.
func TestSupersedeOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		outcome    superseding.Outcome
		superseded bool
	}{
		{name: "completed", outcome: superseding.Outcome{State: tcclient.StateCompleted}, superseded: true},
		{name: "failed by exit code", outcome: superseding.Outcome{State: tcclient.StateFailed}, superseded: true},
		{name: "intermittent-task", outcome: superseding.Outcome{State: tcclient.StateException, Reason: tcclient.ReasonIntermittentTask}, superseded: true},
		{name: "maxRunTime exceeded", outcome: superseding.Outcome{State: tcclient.StateFailed, Aborted: true}},
		{name: "malformed-payload", outcome: superseding.Outcome{State: tcclient.StateException, Reason: tcclient.ReasonMalformedPayload}},
		{name: "internal-error", outcome: superseding.Outcome{State: tcclient.StateException, Reason: tcclient.ReasonInternalError}},
		{name: "worker shutdown", outcome: superseding.Outcome{State: tcclient.StateException, Reason: tcclient.ReasonWorkerShutdown, Aborted: true}},
		{name: "primary lost", outcome: superseding.Outcome{Lost: true, Aborted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			t0 := h.createTask(testQueue, h.url())
			a := h.createTask(testQueue, h.url())
			p := h.createTask(testQueue, h.url())
			initial := h.claimInitial()
			h.answerList(t0, a, p)
			res := h.supersede(initial, h.url())
			require.Equal(t, p, res.Primary.Ref().TaskID)
			res.Secondaries.Finish(context.Background(), res.Primary, tt.outcome)
			// Finish runs once: a second call changes nothing.
			res.Secondaries.Finish(context.Background(), res.Primary, superseding.Outcome{State: tcclient.StateCompleted})
			for _, s := range []string{t0, a} {
				if tt.superseded {
					h.requireRunState(s, tcclient.StateException, tcclient.ReasonSuperseded)
					st, _ := h.fake.Status(s)
					require.Len(t, st.Runs, 1, "superseded is final")
					continue
				}
				h.requireRunState(s, tcclient.StateException, tcclient.ReasonWorkerShutdown)
				require.Empty(t, h.fake.Artifacts(s, 0))
				st, _ := h.fake.Status(s)
				require.Equal(t, tcclient.StatePending, st.State, "released for an immediate retry")
			}
			if tt.superseded {
				var list []superseding.TaskRef
				h.artifactJSON(p, 0, superseding.SupersedesArtifact, &list)
				require.Equal(t, []superseding.TaskRef{{TaskID: t0, RunID: 0}, {TaskID: a, RunID: 0}}, list, "in list order")
			} else {
				require.Empty(t, h.fake.Artifacts(p, 0))
			}
		})
	}
}

// TestSupersedeLongPrimary holds secondaries through several claim
// timeouts: each is reclaimed with its own credentials and resolved with
// the newest ones, and a secondary cancelled meanwhile is dropped: neither
// resolved again nor listed.
func TestSupersedeLongPrimary(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{claimTimeout: 2 * time.Second})
	t0 := h.createTask(testQueue, h.url())
	cancelled := h.createTask(testQueue, h.url())
	b := h.createTask(testQueue, h.url())
	p := h.createTask(testQueue, h.url())
	initial := h.claimInitial()
	h.answerList(t0, cancelled, b, p)
	start := time.Now()
	res := h.supersede(initial, h.url())
	require.Equal(t, p, res.Primary.Ref().TaskID)
	h.fake.Cancel(cancelled)
	// Three reclaims each take the secondaries past their first claim's
	// end (the reclaimer renews at half of the 2 s).
	reclaimed := func(id string) int {
		n := 0
		for _, r := range h.fake.Requests() {
			if r.Path == "/api/queue/v1/task/"+id+"/runs/0/reclaim" {
				n++
			}
		}
		return n
	}
	testclock.WaitFor(t, time.Minute, "three reclaims of each secondary", func() bool {
		return reclaimed(t0) >= 3 && reclaimed(b) >= 3
	})
	require.True(t, time.Now().After(start.Add(2*time.Second)), "past the first claims' end")
	for _, id := range []string{t0, b} {
		require.Equal(t, tcclient.StateRunning, h.run0(id).State, "%s kept alive by its reclaimer", id)
	}
	res.Secondaries.Finish(context.Background(), res.Primary, superseding.Outcome{State: tcclient.StateCompleted})
	h.requireRunState(t0, tcclient.StateException, tcclient.ReasonSuperseded)
	h.requireRunState(b, tcclient.StateException, tcclient.ReasonSuperseded)
	h.requireRunState(cancelled, tcclient.StateException, "canceled")
	var list []superseding.TaskRef
	h.artifactJSON(p, 0, superseding.SupersedesArtifact, &list)
	require.Equal(t, []superseding.TaskRef{{TaskID: t0, RunID: 0}, {TaskID: b, RunID: 0}}, list)
	require.Empty(t, h.fake.Artifacts(cancelled, 0))

	reclaims := map[string]int{}
	for _, r := range h.fake.Requests() {
		for _, id := range []string{t0, b} {
			switch r.Path {
			case "/api/queue/v1/task/" + id + "/runs/0/reclaim":
				reclaims[id]++
			case "/api/queue/v1/task/" + id + "/runs/0/exception":
				// task-client/<taskId>/<runId>/on/<group>/<id>/until/<epoch>:
				// the first claim's credentials end about 2 s after start,
				// reclaimed ones later.
				require.True(t, strings.HasPrefix(r.ClientID, "task-client/"+id+"/0/"), r.ClientID)
				until, err := strconv.ParseInt(r.ClientID[strings.LastIndex(r.ClientID, "/")+1:], 10, 64)
				require.NoError(t, err)
				require.Greater(t, until, start.Unix()+3, "resolved with reclaimed credentials")
			}
		}
	}
	require.GreaterOrEqual(t, reclaims[t0], 2)
	require.GreaterOrEqual(t, reclaims[b], 2)
}

// TestSupersedeShutdownWhileClaiming checks §6.2 row 14c: claims in flight
// settle, no new one starts, and held claims are released with
// worker-shutdown; the step then reports an error so the initial task runs
// (and is aborted) alone.
func TestSupersedeShutdownWhileClaiming(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{stepOpts: superseding.Options{Concurrency: 1}})
	t0 := h.createTask(testQueue, h.url())
	a := h.createTask(testQueue, h.url())
	b := h.createTask(testQueue, h.url())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fired atomic.Bool
	h.w.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/task/"+a) && fired.CompareAndSwap(false, true) {
			cancel() // the shutdown arrives while a's claim is in flight
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	initial := h.claimInitial()
	h.answerList(t0, a, b)
	res, err := h.step.Run(ctx, h.w.SupersedingRequest(initial, h.url()))
	require.ErrorContains(t, err, "shutting down")
	require.Nil(t, res.Primary)
	require.True(t, fired.Load())
	h.requireRunState(a, tcclient.StateException, tcclient.ReasonWorkerShutdown)
	require.Equal(t, tcclient.StatePending, h.run0(b).State, "no claim started after the shutdown")
	require.Equal(t, tcclient.StateRunning, h.run0(t0).State, "the worker aborts the initial task itself")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSupersedeEmptyClaimAnswer: a claimTask answered 200 with an empty
// body (what a quarantined worker may get) holds nothing.
func TestSupersedeEmptyClaimAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	t0 := h.createTask(testQueue, h.url())
	other := h.createTask(testQueue, h.url())
	h.w.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/task/"+other+"/runs/0/claim") {
			return &http.Response{
				StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader("{}")), Request: r,
			}, nil
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	initial := h.claimInitial()
	h.answerList(t0, other)
	res := h.supersede(initial, h.url())
	require.Nil(t, res.Primary)
	require.Nil(t, res.Secondaries)
	require.Contains(t, strings.Join(res.LogLines, "\n"), other+" not claimed: the queue's answer is not a usable claim")
	require.Equal(t, tcclient.StatePending, h.run0(other).State)
}

// TestSupersedeLeavesQueueFlowToTheQueue: a task under a queue-side flow
// key is run alone, without calling its superseder.
func TestSupersedeLeavesQueueFlowToTheQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	t0 := h.createTask(testQueue, h.url())
	h.answerList(t0)
	initial := h.claimInitial()
	initial.Task.Extra = json.RawMessage(`{"flow": {"key": "lint", "supersede": true}}`)
	res := h.supersede(initial, h.url())
	require.Nil(t, res.Primary)
	require.Empty(t, res.Warnings)
	require.Len(t, res.LogLines, 1)
	require.Contains(t, res.LogLines[0], `under the queue's flow control (extra.flow, key "lint")`)
	require.Empty(t, h.supersederRequests(), "the superseder is not called")
}
