package queueapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// The names in this file carry a "harness" flavour so they cannot collide
// with helpers other test files of this directory may declare.

// harnessEpoch is where every fake clock starts: a fixed instant with a
// millisecond part, so canonical timestamps are predictable in assertions.
var harnessEpoch = time.Date(2031, time.March, 4, 5, 6, 7, 891_000_000, time.UTC)

// permitAll authorizes every call: these tests are about the request
// pipeline and the queue's behaviour, not scopes.
type permitAll struct{}

func (permitAll) Authorize(*api.Call, string, map[string]any) error { return nil }

// harnessIssuer mints real claim credentials with a fixed issuer, so the
// credential path runs exactly as in production.
type harnessIssuer struct{ issuer auth.Credentials }

func (i harnessIssuer) TaskCredentials(taskID string, runID int, workerGroup, workerID string, now, takenUntil time.Time, taskScopes []string) (queueapi.Credentials, error) {
	c, err := auth.TaskCredentials(auth.TaskCredentialsOptions{
		TaskID: taskID, RunID: runID, WorkerGroup: workerGroup, WorkerID: workerID,
		TakenUntil: takenUntil, TaskScopes: taskScopes, Now: now, Issuer: i.issuer,
	})
	if err != nil {
		return queueapi.Credentials{}, fmt.Errorf("issuing test credentials: %w", err)
	}
	return queueapi.Credentials{ClientID: c.ClientID, AccessToken: c.AccessToken, Certificate: c.Certificate}, nil
}

// subscribeSignal wraps the store's hub to announce each WaitForWork call,
// so a test can act exactly when a claimWork has started waiting instead of
// sleeping and hoping.
type subscribeSignal struct {
	store.WorkHub
	subscribed chan string
}

func (s *subscribeSignal) WaitForWork(taskQueueID string, capacity int, c *store.Claimant, woken func()) *store.Waiting {
	w := s.WorkHub.WaitForWork(taskQueueID, capacity, c, woken)
	select {
	case s.subscribed <- taskQueueID:
	default:
	}
	return w
}

// harnessOptions tune newHarness; zero values pick test-friendly defaults.
type harnessOptions struct {
	LongPoll        time.Duration
	ClaimTimeout    time.Duration
	MaxDependencies int
	Metrics         bool
}

// harness is one API server over a fresh SQLite store, served by httptest.
type harness struct {
	srv        *queueapi.Server
	url        string
	clock      *testclock.Clock // moved by hand
	store      store.Store
	subscribed chan string
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	if opts.LongPoll == 0 {
		opts.LongPoll = 2 * time.Second
	}
	if opts.ClaimTimeout == 0 {
		opts.ClaimTimeout = 20 * time.Minute
	}
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/hopper.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	spy := &subscribeSignal{WorkHub: db, subscribed: make(chan string, 64)}
	clock := testclock.New(harnessEpoch)
	var (
		metrics     *queueapi.Metrics
		httpMetrics *api.Metrics
	)
	if opts.Metrics {
		// The metrics read the store itself (its combining counters are
		// not part of store.Store).
		metrics = queueapi.NewMetrics(db, clock)
		httpMetrics = api.NewMetrics(metrics.Collectors()...)
	}
	srv, err := queueapi.New(queueapi.Options{
		Config: queueapi.Config{RootURL: "http://hopper.test", LongPoll: opts.LongPoll, ClaimTimeout: opts.ClaimTimeout,
			MaxDependencies: opts.MaxDependencies, Version: "test"},
		Store: db, Hub: spy, Clock: clock,
		Issuer:  harnessIssuer{issuer: auth.Credentials{ClientID: "static/taskcluster/queue", AccessToken: "harness-issuer-access-token-0123456789"}},
		Metrics: metrics,
	})
	require.NoError(t, err)
	httpSrv, err := api.New(api.Options{Clock: clock, Authorizer: permitAll{}, Metrics: httpMetrics, Routes: queueapi.Routes(queueapi.Deps{Server: srv})})
	require.NoError(t, err)
	// Served as `hopper serve` does: waiting claimWork calls park.
	hs := httptest.NewUnstartedServer(httpSrv.Handler())
	hs.Listener = httpSrv.Listener(hs.Listener)
	hs.Start()
	t.Cleanup(func() {
		srv.Drain()
		hs.Close()
	})
	return &harness{srv: srv, url: hs.URL, clock: clock, store: db, subscribed: spy.subscribed}
}

// queuePath prefixes a queue API route.
func queuePath(route string) string { return "/api/queue/v1" + route }

// reply is a raw HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// request sends body as given: nil sends nothing, []byte and string are
// sent raw (with contentType if not empty), anything else is JSON-encoded
// and sent as application/json.
func (h *harness) request(t *testing.T, method, path, contentType string, body any) reply {
	t.Helper()
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rdr = bytes.NewReader(b)
	case string:
		rdr = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rdr = bytes.NewReader(raw)
		if contentType == "" {
			contentType = "application/json"
		}
	}
	req, err := http.NewRequestWithContext(context.Background(), method, h.url+path, rdr)
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// call sends a JSON request and requires a 200, decoding the reply into out
// (when not nil).
func (h *harness) call(t *testing.T, method, path string, in, out any) {
	t.Helper()
	r := h.request(t, method, path, "", in)
	require.Equal(t, http.StatusOK, r.status, "%s %s: %s", method, path, r.body)
	if out != nil {
		require.NoError(t, json.Unmarshal(r.body, out), "%s", r.body)
	}
}

// taskDef returns a valid createTask body for the harness's current time in
// task queue tq, with edits applied on top.
func (h *harness) taskDef(tq string, edits map[string]any) map[string]any {
	now := h.clock.Now()
	def := map[string]any{
		"taskQueueId": tq,
		"created":     queue.NewTime(now).String(),
		"deadline":    queue.NewTime(now.Add(time.Hour)).String(),
		"payload":     map[string]any{},
		"metadata": map[string]any{
			"name": "harness task", "description": "made by the api tests",
			"owner": "tests@example.com", "source": "https://example.com/hopper",
		},
	}
	maps.Copy(def, edits)
	for k, v := range edits {
		if v == nil {
			delete(def, k)
		}
	}
	return def
}

// createTask creates a task and returns its status.
func (h *harness) createTask(t *testing.T, taskID string, def map[string]any) tcclient.TaskStatus {
	t.Helper()
	var out tcclient.StatusResponse
	h.call(t, http.MethodPut, queuePath("/task/"+taskID), def, &out)
	return out.Status
}

// status returns a task's status.
func (h *harness) status(t *testing.T, taskID string) tcclient.TaskStatus {
	t.Helper()
	var out tcclient.StatusResponse
	h.call(t, http.MethodGet, queuePath("/task/"+taskID+"/status"), nil, &out)
	return out.Status
}

// claimWork calls claimWork for worker group/id "wg"/"w1" and returns the
// claims.
func (h *harness) claimWork(t *testing.T, tq string, tasks int) []tcclient.TaskClaim {
	t.Helper()
	var out tcclient.ClaimWorkResponse
	h.call(t, http.MethodPost, queuePath("/claim-work/"+tcclient.EscapePathParam(tq)),
		map[string]any{"workerGroup": "wg", "workerId": "w1", "tasks": tasks}, &out)
	return out.Tasks
}

// requireNotCreated checks that nothing is stored under taskID: neither the
// task nor a task group of that id (a task's default group).
func (h *harness) requireNotCreated(t *testing.T, taskID string) {
	t.Helper()
	r := h.request(t, http.MethodGet, queuePath("/task/"+taskID), "", nil)
	require.Equal(t, http.StatusNotFound, r.status, "task %s exists: %s", taskID, r.body)
	r = h.request(t, http.MethodGet, queuePath("/task-group/"+taskID), "", nil)
	require.Equal(t, http.StatusNotFound, r.status, "task group %s exists: %s", taskID, r.body)
}

// errorReply is Taskcluster's error body.
type errorReply struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	RequestInfo struct {
		Method  string            `json:"method"`
		Params  map[string]string `json:"params"`
		Payload json.RawMessage   `json:"payload"`
		Time    string            `json:"time"`
	} `json:"requestInfo"`
	Details map[string]any `json:"details"`
}

// requireError checks an error reply in full: status, JSON content type,
// exactly the documented top-level keys, the code, the message's footer,
// and requestInfo's method, params and time. It returns the decoded body
// and the message's first part (before the footer).
func (h *harness) requireError(t *testing.T, r reply, status int, code, method string, params map[string]string) (errorReply, string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "application/json"), "content type %q", r.header.Get("Content-Type"))
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &keys), "%s", r.body)
	for k := range keys {
		require.Contains(t, []string{"code", "message", "requestInfo", "details"}, k, "unexpected key in %s", r.body)
	}
	var e errorReply
	require.NoError(t, json.Unmarshal(r.body, &e))
	require.Equal(t, code, e.Code)
	now := queue.NewTime(h.clock.Now()).String()
	footer := fmt.Sprintf("\n\n---\n\n* method:     %s\n* errorCode:  %s\n* statusCode: %d\n* time:       %s", method, code, status, now)
	require.True(t, strings.HasSuffix(e.Message, footer), "message %q lacks footer %q", e.Message, footer)
	text := strings.TrimSuffix(e.Message, footer)
	require.NotEmpty(t, strings.TrimSpace(text), "message has no explanation before its footer")
	require.Equal(t, method, e.RequestInfo.Method)
	if params == nil {
		params = map[string]string{}
	}
	require.Equal(t, params, e.RequestInfo.Params)
	require.Equal(t, now, e.RequestInfo.Time)
	require.True(t, json.Valid(e.RequestInfo.Payload), "payload %s", e.RequestInfo.Payload)
	return e, text
}

// newTaskID returns a fresh slugid.
func newTaskID() string { return tcclient.NewTaskID() }

// resolveBackground runs the background duties once, as the server's
// maintenance loops do on every tick: claims whose takenUntil passed, then
// tasks whose deadline (plus delay) passed. It returns how many tasks
// changed.
func (h *harness) resolveBackground(ctx context.Context, deadlineDelay time.Duration) (int, error) {
	claims, err := (&maintenance.ClaimExpirer{Store: h.store, Publisher: h.srv, Clock: h.clock}).RunOnce(ctx)
	if err != nil {
		return claims, err
	}
	deadlines, err := (&maintenance.DeadlineResolver{Store: h.store, Publisher: h.srv, Clock: h.clock, Delay: deadlineDelay}).RunOnce(ctx)
	return claims + deadlines, err
}
