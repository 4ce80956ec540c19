package queueapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// How a refused request's requestInfo.payload must relate to what was sent.
const (
	payloadEmpty    = "empty"    // {}: the body could not be read or parsed
	payloadSent     = "sent"     // the body exactly as sent
	payloadDefaults = "defaults" // the sent body with schema defaults filled in
)

// requirePayload checks requestInfo.payload against the body that was sent.
func requirePayload(t *testing.T, e errorReply, want string, sent any) {
	t.Helper()
	switch want {
	case payloadEmpty:
		require.JSONEq(t, `{}`, string(e.RequestInfo.Payload))
	case payloadSent:
		require.JSONEq(t, string(bodyBytes(t, sent)), string(e.RequestInfo.Payload))
	case payloadDefaults:
		var got map[string]any
		require.NoError(t, json.Unmarshal(e.RequestInfo.Payload, &got))
		var sentMap map[string]any
		require.NoError(t, json.Unmarshal(bodyBytes(t, sent), &sentMap))
		for k, v := range sentMap {
			require.Equal(t, v, got[k], "payload field %s", k)
		}
		require.Greater(t, len(got), len(sentMap), "no defaults were filled into %s", e.RequestInfo.Payload)
	default:
		t.Fatalf("unknown payload expectation %q", want)
	}
}

// bodyBytes returns the bytes a request body value was sent as (see
// harness.request).
func bodyBytes(t *testing.T, sent any) []byte {
	t.Helper()
	switch b := sent.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	}
	raw, err := json.Marshal(sent)
	require.NoError(t, err)
	return raw
}

// TestBadInputIsRefusedWithoutWriting sends malformed, invalid and
// semantically wrong requests. Each must get its documented 4xx (never a
// 500) in Taskcluster's exact error format, and must leave nothing behind.
func TestBadInputIsRefusedWithoutWriting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{MaxDependencies: 3})
	now := h.clock.Now()
	at := func(d time.Duration) string { return queue.NewTime(now.Add(d)).String() }
	const tq = "prov-bad/wt-bad"

	// A dependency that expires before any task with a one-hour deadline.
	shortLived := newTaskID()
	h.createTask(t, shortLived, h.taskDef(tq, map[string]any{"deadline": at(30 * time.Minute), "expires": at(30 * time.Minute)}))
	missing := newTaskID()

	type tc struct {
		name        string
		method      string
		path        func(taskID string) string // given a fresh, unused taskId
		contentType string
		body        func(taskID string) any
		status      int
		code        string
		apiMethod   string
		params      func(taskID string) map[string]string
		payload     string
		contains    []string
		details     map[string]any
		// touchesQueue names a task queue the request must not record.
		touchesQueue string
	}
	createPath := func(id string) string { return queuePath("/task/" + id) }
	createParams := func(id string) map[string]string { return map[string]string{"taskId": id} }
	def := func(edits map[string]any) func(string) any {
		return func(string) any { return h.taskDef(tq, edits) }
	}
	raw := func(s string) func(string) any { return func(string) any { return s } }
	claimBody := func(edits map[string]any) func(string) any {
		return func(string) any {
			b := map[string]any{"workerGroup": "wg", "workerId": "w1", "tasks": 1}
			for k, v := range edits {
				if v == nil {
					delete(b, k)
				} else {
					b[k] = v
				}
			}
			return b
		}
	}
	fixed := func(p string) func(string) string { return func(string) string { return p } }
	claimPath := fixed(queuePath("/claim-work/prov-bad%2Fwt-bad"))
	claimParams := func(string) map[string]string { return map[string]string{"taskQueueId": tq} }
	bad400 := func(c tc) tc {
		if c.status == 0 {
			c.status = http.StatusBadRequest
		}
		return c
	}

	cases := []tc{
		// Unreadable bodies.
		{name: "truncated JSON", method: http.MethodPut, path: createPath, contentType: "application/json", body: raw(`{"taskQueueId":`),
			code: api.CodeMalformedPayload, apiMethod: "createTask", params: createParams, payload: payloadEmpty, contains: []string{"not valid JSON"}},
		{name: "JSON scalar body", method: http.MethodPut, path: createPath, contentType: "application/json", body: raw(`42`),
			code: api.CodeMalformedPayload, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"JSON object"}},
		{name: "text/plain content type", method: http.MethodPut, path: createPath, contentType: "text/plain", body: func(string) any {
			b, _ := json.Marshal(h.taskDef(tq, nil))
			return string(b)
		}, code: api.CodeMalformedPayload, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"Content-Type", "text/plain"}},
		{name: "no content type", method: http.MethodPut, path: createPath, body: func(string) any {
			b, _ := json.Marshal(h.taskDef(tq, nil))
			return b
		}, code: api.CodeMalformedPayload, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"Content-Type"}},
		{name: "body over 10 MB", method: http.MethodPut, path: createPath, contentType: "application/json", body: func(string) any {
			return `{"pad":"` + strings.Repeat("x", 10<<20) + `"}`
		}, status: http.StatusRequestEntityTooLarge, code: api.CodeInputTooLarge, apiMethod: "createTask", params: createParams, payload: payloadEmpty, contains: []string{"larger than"}},

		// Schema violations name the offending location.
		{name: "unknown top-level field", method: http.MethodPut, path: createPath, body: def(map[string]any{"colour": "blue"}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"colour"}},
		{name: "unknown metadata field", method: http.MethodPut, path: createPath, body: def(map[string]any{"metadata": map[string]any{
			"name": "n", "description": "d", "owner": "o", "source": "https://example.com", "flavour": "x"}}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/metadata", "flavour"}},
		{name: "taskQueueId pattern", method: http.MethodPut, path: createPath, body: func(string) any { return h.taskDef("prov-bad/Upper_Case", nil) },
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/taskQueueId"}},
		{name: "metadata.source pattern", method: http.MethodPut, path: createPath, body: def(map[string]any{"metadata": map[string]any{
			"name": "n", "description": "d", "owner": "o", "source": "ftp://example.com"}}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/metadata/source"}},
		{name: "missing deadline", method: http.MethodPut, path: createPath, body: def(map[string]any{"deadline": nil}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"deadline"}},
		{name: "retries above 49", method: http.MethodPut, path: createPath, body: def(map[string]any{"retries": 50}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/retries"}},
		{name: "unknown priority", method: http.MethodPut, path: createPath, body: def(map[string]any{"priority": "urgent"}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/priority"}},
		{name: "dependency not a slugid", method: http.MethodPut, path: createPath, body: def(map[string]any{"dependencies": []string{"nope"}}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/dependencies/0"}},
		{name: "duplicate dependencies", method: http.MethodPut, path: createPath, body: def(map[string]any{"dependencies": []string{shortLived, shortLived}}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/dependencies"}},
		{name: "created not a date", method: http.MethodPut, path: createPath, body: def(map[string]any{"created": "yesterday"}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/created"}},
		{name: "created without time zone", method: http.MethodPut, path: createPath, body: def(map[string]any{"created": now.Format("2006-01-02T15:04:05")}),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"/created"}},
		{name: "array body", method: http.MethodPut, path: createPath, contentType: "application/json", body: raw(`[]`),
			code: api.CodeInputValidationError, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"(root)"}},

		// URL parameters and query strings.
		{name: "taskId not a slugid", method: http.MethodPut, path: fixed(queuePath("/task/not-a-slugid")), body: def(nil),
			code: api.CodeInvalidRequestArguments, apiMethod: "createTask", params: fixedParams(map[string]string{"taskId": "not-a-slugid"}), payload: payloadSent, contains: []string{"taskId"}},
		{name: "unknown query parameter", method: http.MethodPut, path: func(id string) string { return createPath(id) + "?colour=blue" }, body: def(nil),
			code: api.CodeInvalidRequestArguments, apiMethod: "createTask", params: createParams, payload: payloadSent, contains: []string{"colour"}},

		// Semantic checks done by the handler.
		{name: "created too old", method: http.MethodPut, path: createPath, body: def(map[string]any{"created": at(-16 * time.Minute)}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"15 minutes in the past"}},
		{name: "created in the future", method: http.MethodPut, path: createPath, body: def(map[string]any{"created": at(16 * time.Minute)}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"15 minutes in the future"}},
		{name: "created after deadline", method: http.MethodPut, path: createPath, body: def(map[string]any{"created": at(10 * time.Minute), "deadline": at(5 * time.Minute)}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"before created"}},
		{name: "deadline passed", method: http.MethodPut, path: createPath, body: def(map[string]any{"created": at(-10 * time.Minute), "deadline": at(-time.Minute)}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"in the past"}},
		{name: "deadline beyond five days", method: http.MethodPut, path: createPath, body: def(map[string]any{"deadline": at(5*24*time.Hour + 16*time.Minute)}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"5 days"}},
		{name: "expires before deadline", method: http.MethodPut, path: createPath, body: def(map[string]any{"expires": at(30 * time.Minute)}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"before the deadline"}},
		{name: "scope ending in **", method: http.MethodPut, path: createPath, body: def(map[string]any{"scopes": []string{"queue:**"}}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"**"}},
		{name: "taskQueueId disagrees with provisionerId/workerType", method: http.MethodPut, path: createPath,
			body: def(map[string]any{"provisionerId": "prov-bad", "workerType": "other"}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"taskQueueId"}},
		{name: "no task queue at all", method: http.MethodPut, path: createPath, body: def(map[string]any{"taskQueueId": nil}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"taskQueueId"}},
		{name: "more dependencies than the deployment allows", method: http.MethodPut, path: createPath,
			body: def(map[string]any{"dependencies": []string{newTaskID(), newTaskID(), newTaskID(), newTaskID()}}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"too many dependencies", "3"}},
		{name: "missing dependency", method: http.MethodPut, path: createPath, body: def(map[string]any{"dependencies": []string{missing}}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"non-existing", missing},
			details: map[string]any{"missingTaskDependencies": []any{missing}}},
		{name: "dependency expiring before the deadline", method: http.MethodPut, path: createPath, body: def(map[string]any{"dependencies": []string{shortLived}}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{"expire", shortLived},
			details: map[string]any{"expiringTaskDependencies": []any{shortLived}}},
		{name: "missing and expiring dependencies", method: http.MethodPut, path: createPath, body: def(map[string]any{"dependencies": []string{shortLived, missing}}),
			code: api.CodeInputError, apiMethod: "createTask", params: createParams, payload: payloadDefaults, contains: []string{missing, shortLived},
			details: map[string]any{"missingTaskDependencies": []any{missing}, "expiringTaskDependencies": []any{shortLived}}},

		// claimWork: the worker and queue must not be recorded either.
		{name: "claimWork truncated JSON", method: http.MethodPost, path: claimPath, contentType: "application/json", body: raw(`{"workerGroup"`),
			code: api.CodeMalformedPayload, apiMethod: "claimWork", params: claimParams, payload: payloadEmpty, touchesQueue: tq},
		{name: "claimWork tasks above 32", method: http.MethodPost, path: claimPath, body: claimBody(map[string]any{"tasks": 33}),
			code: api.CodeInputValidationError, apiMethod: "claimWork", params: claimParams, payload: payloadSent, contains: []string{"/tasks"}, touchesQueue: tq},
		{name: "claimWork without workerId", method: http.MethodPost, path: claimPath, body: claimBody(map[string]any{"workerId": nil}),
			code: api.CodeInputValidationError, apiMethod: "claimWork", params: claimParams, payload: payloadSent, contains: []string{"workerId"}, touchesQueue: tq},
		{name: "claimWork unknown field", method: http.MethodPost, path: claimPath, body: claimBody(map[string]any{"capacity": 4}),
			code: api.CodeInputValidationError, apiMethod: "claimWork", params: claimParams, payload: payloadSent, contains: []string{"capacity"}, touchesQueue: tq},
		{name: "claimWork bad workerGroup pattern", method: http.MethodPost, path: claimPath, body: claimBody(map[string]any{"workerGroup": "w g"}),
			code: api.CodeInputValidationError, apiMethod: "claimWork", params: claimParams, payload: payloadSent, contains: []string{"/workerGroup"}, touchesQueue: tq},
		{name: "claimWork upper-case workerType", method: http.MethodPost, path: fixed(queuePath("/claim-work/prov-bad%2FWT")), body: claimBody(nil),
			code: api.CodeInvalidRequestArguments, apiMethod: "claimWork", params: fixedParams(map[string]string{"taskQueueId": "prov-bad/WT"}), payload: payloadSent,
			contains: []string{"taskQueueId"}},
		{name: "claimWork raw slash with bad workerType", method: http.MethodPost, path: fixed(queuePath("/claim-work/prov-bad/W_T")), body: claimBody(nil),
			code: api.CodeInvalidRequestArguments, apiMethod: "claimWork", params: fixedParams(map[string]string{"taskQueueId": "prov-bad/W_T"}), payload: payloadSent,
			contains: []string{"taskQueueId"}},
		{name: "claimWork taskQueueId without slash", method: http.MethodPost, path: fixed(queuePath("/claim-work/prov-bad")), body: claimBody(nil),
			code: api.CodeInvalidRequestArguments, apiMethod: "claimWork", params: fixedParams(map[string]string{"taskQueueId": "prov-bad"}), payload: payloadSent,
			contains: []string{"taskQueueId"}},

		// Other methods.
		{name: "pendingTasks bad taskQueueId", method: http.MethodGet, path: fixed(queuePath("/pending/prov-bad%2FBAD")),
			code: api.CodeInvalidRequestArguments, apiMethod: "pendingTasks", params: fixedParams(map[string]string{"taskQueueId": "prov-bad/BAD"}), payload: payloadEmpty, contains: []string{"taskQueueId"}},
		{name: "reportCompleted runId not a number", method: http.MethodPost, path: func(id string) string { return queuePath("/task/" + id + "/runs/x/completed") },
			code: api.CodeInvalidRequestArguments, apiMethod: "reportCompleted", params: func(id string) map[string]string { return map[string]string{"taskId": id, "runId": "x"} },
			payload: payloadEmpty, contains: []string{"runId"}},
		{name: "reclaimTask negative runId", method: http.MethodPost, path: func(id string) string { return queuePath("/task/" + id + "/runs/-1/reclaim") },
			code: api.CodeInvalidRequestArguments, apiMethod: "reclaimTask", params: func(id string) map[string]string { return map[string]string{"taskId": id, "runId": "-1"} },
			payload: payloadEmpty, contains: []string{"runId"}},
		{name: "reportException unknown reason", method: http.MethodPost, path: func(id string) string { return queuePath("/task/" + id + "/runs/0/exception") },
			body: func(string) any { return map[string]any{"reason": "bored"} }, code: api.CodeInputValidationError, apiMethod: "reportException",
			params: func(id string) map[string]string { return map[string]string{"taskId": id, "runId": "0"} }, payload: payloadSent, contains: []string{"/reason"}},
		{name: "status with a query string", method: http.MethodGet, path: func(id string) string { return queuePath("/task/" + id + "/status?verbose=1") },
			code: api.CodeInvalidRequestArguments, apiMethod: "status", params: createParams, payload: payloadEmpty, contains: []string{"verbose"}},
		{name: "listTaskGroup limit not a number", method: http.MethodGet, path: func(id string) string { return queuePath("/task-group/" + id + "/list?limit=ten") },
			code: api.CodeInvalidRequestArguments, apiMethod: "listTaskGroup", params: func(id string) map[string]string { return map[string]string{"taskGroupId": id} },
			payload: payloadEmpty, contains: []string{"limit"}},
		{name: "tasks with taskIds not a list", method: http.MethodPost, path: fixed(queuePath("/tasks")), body: func(id string) any { return map[string]any{"taskIds": id} },
			code: api.CodeInputValidationError, apiMethod: "tasks", params: fixedParams(map[string]string{}), payload: payloadSent, contains: []string{"/taskIds"}},
	}
	for _, c := range cases {
		c := bad400(c)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			taskID := newTaskID()
			var body any
			if c.body != nil {
				body = c.body(taskID)
			}
			r := h.request(t, c.method, c.path(taskID), c.contentType, body)
			require.NotEqual(t, http.StatusInternalServerError, r.status, "%s", r.body)
			e, text := h.requireError(t, r, c.status, c.code, c.apiMethod, c.params(taskID))
			for _, s := range c.contains {
				require.Contains(t, text, s)
			}
			if c.payload != "" {
				requirePayload(t, e, c.payload, body)
			}
			if c.details != nil {
				require.Equal(t, c.details, e.Details)
			} else {
				require.Nil(t, e.Details)
			}
			h.requireNotCreated(t, taskID)
			if c.touchesQueue != "" {
				r := h.request(t, http.MethodGet, queuePath("/task-queues/"+tcclient.EscapePathParam(c.touchesQueue)), "", nil)
				require.Equal(t, http.StatusNotFound, r.status, "task queue %s was recorded: %s", c.touchesQueue, r.body)
			}
		})
	}
}

// fixedParams returns a params function that ignores the taskId.
func fixedParams(p map[string]string) func(string) map[string]string {
	return func(string) map[string]string { return p }
}

// TestUnknownTaskIsNotFound: every method addressed to a task answers 404
// ResourceNotFound for an unknown taskId (and for an unknown run of a known
// task) without creating anything or changing the known task.
func TestUnknownTaskIsNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	const tq = "prov-nf/wt-nf"
	known := newTaskID()
	h.createTask(t, known, h.taskDef(tq, nil))
	before := h.status(t, known)

	worker := map[string]any{"workerGroup": "wg", "workerId": "w1"}
	cases := []struct {
		name, method, route, apiMethod string
		run                            string // "" for task-level methods
		body                           any
		payload                        string
	}{
		{name: "task", method: http.MethodGet, route: "", apiMethod: "task", payload: payloadEmpty},
		{name: "status", method: http.MethodGet, route: "/status", apiMethod: "status", payload: payloadEmpty},
		{name: "listDependentTasks", method: http.MethodGet, route: "/dependents", apiMethod: "listDependentTasks", payload: payloadEmpty},
		{name: "scheduleTask", method: http.MethodPost, route: "/schedule", apiMethod: "scheduleTask", payload: payloadEmpty},
		{name: "rerunTask", method: http.MethodPost, route: "/rerun", apiMethod: "rerunTask", payload: payloadEmpty},
		{name: "cancelTask", method: http.MethodPost, route: "/cancel", apiMethod: "cancelTask", payload: payloadEmpty},
		{name: "claimTask", method: http.MethodPost, route: "/claim", run: "0", apiMethod: "claimTask", body: worker, payload: payloadSent},
		{name: "reclaimTask", method: http.MethodPost, route: "/reclaim", run: "0", apiMethod: "reclaimTask", payload: payloadEmpty},
		{name: "reportCompleted", method: http.MethodPost, route: "/completed", run: "0", apiMethod: "reportCompleted", payload: payloadEmpty},
		{name: "reportFailed", method: http.MethodPost, route: "/failed", run: "0", apiMethod: "reportFailed", payload: payloadEmpty},
		{name: "reportException", method: http.MethodPost, route: "/exception", run: "0", apiMethod: "reportException",
			body: map[string]any{"reason": "worker-shutdown"}, payload: payloadSent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			taskID := newTaskID()
			path := "/task/" + taskID
			params := map[string]string{"taskId": taskID}
			if c.run != "" {
				path += "/runs/" + c.run
				params["runId"] = c.run
			}
			r := h.request(t, c.method, queuePath(path+c.route), "", c.body)
			e, text := h.requireError(t, r, http.StatusNotFound, api.CodeResourceNotFound, c.apiMethod, params)
			require.Contains(t, text, taskID)
			requirePayload(t, e, c.payload, c.body)
			h.requireNotCreated(t, taskID)
		})
	}

	// Unknown runs of a known task are 404 as well, and change nothing.
	runCases := []struct {
		name, route, apiMethod string
		body                   any
	}{
		{name: "claimTask", route: "/claim", apiMethod: "claimTask", body: worker},
		{name: "reclaimTask", route: "/reclaim", apiMethod: "reclaimTask"},
		{name: "reportCompleted", route: "/completed", apiMethod: "reportCompleted"},
		{name: "reportFailed", route: "/failed", apiMethod: "reportFailed"},
		{name: "reportException", route: "/exception", apiMethod: "reportException", body: map[string]any{"reason": "internal-error"}},
	}
	for _, c := range runCases {
		t.Run("unknown run/"+c.name, func(t *testing.T) {
			t.Parallel()
			r := h.request(t, http.MethodPost, queuePath("/task/"+known+"/runs/7"+c.route), "", c.body)
			h.requireError(t, r, http.StatusNotFound, api.CodeResourceNotFound, c.apiMethod, map[string]string{"taskId": known, "runId": "7"})
			require.Equal(t, before, h.status(t, known))
		})
	}
}

// TestUnmatchedRoute: paths outside the API get the plain 404 body.
func TestUnmatchedRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	for _, path := range []string{"/nope", queuePath("/no-such-method"), queuePath("/task")} {
		r := h.request(t, http.MethodGet, path, "", nil)
		require.Equal(t, http.StatusNotFound, r.status, path)
		require.JSONEq(t, `{"error":"Not found"}`, string(r.body), path)
	}
}

// claimResult is what a background claimWork call produced.
type claimResult struct {
	claims []tcclient.TaskClaim
	err    error
	at     time.Time
}

// claimInBackground starts a claimWork call and returns where its result
// will arrive. It does not use require (not allowed off the test goroutine).
func (h *harness) claimInBackground(tq, workerID string) <-chan claimResult {
	out := make(chan claimResult, 1)
	go func() {
		c := &tcclient.Client{RootURL: h.url, MaxRetries: -1}
		resp, err := c.ClaimWork(context.Background(), tq, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: workerID, Tasks: 1})
		res := claimResult{err: err, at: time.Now()}
		if resp != nil {
			res.claims = resp.Tasks
		}
		out <- res
	}()
	return out
}

// awaitSubscribed waits until a claimWork on tq has subscribed to wake-ups.
func (h *harness) awaitSubscribed(t *testing.T, tq string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-h.subscribed:
			if got == tq {
				return
			}
		case <-timeout:
			t.Fatalf("no claimWork subscribed to %s", tq)
		}
	}
}

// TestClaimWorkWakesOnCreate: a claimWork waiting on an empty queue returns
// the task created during its wait promptly, woken by the store's pending
// notification rather than by its five-second backup poll or the long-poll
// timeout.
func TestClaimWorkWakesOnCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{LongPoll: 20 * time.Second})
	const samples = 3
	var latencies []time.Duration
	for i := range samples {
		tq := "prov-wake/wt-" + string(rune('a'+i))
		res := h.claimInBackground(tq, "w1")
		h.awaitSubscribed(t, tq)
		// The first (empty) claim attempt has finished once the call is
		// parked: it is truly waiting when the task arrives.
		waitParked(t, h, 1)
		taskID := newTaskID()
		h.createTask(t, taskID, h.taskDef(tq, nil))
		created := time.Now()
		select {
		case r := <-res:
			require.NoError(t, r.err)
			require.Len(t, r.claims, 1)
			require.Equal(t, taskID, r.claims[0].Status.TaskID)
			latencies = append(latencies, r.at.Sub(created))
		case <-time.After(15 * time.Second):
			t.Fatal("claimWork did not return within 15 s of the task's creation")
		}
	}
	t.Logf("wake latencies (createTask reply → claimWork reply): %v", latencies)
	// The best of three stays far below the 5 s backup poll even on a busy
	// machine; it would be seconds if only the backup poll woke the call.
	best := latencies[0]
	for _, l := range latencies[1:] {
		best = min(best, l)
	}
	require.Less(t, best, 500*time.Millisecond, "claimWork was not woken by the pending notification")
}

// TestClaimWorkLongPollEndsEmpty: with nothing pending, claimWork answers
// {"tasks": []} once the long-poll period (less its random spread) has
// passed, not before.
func TestClaimWorkLongPollEndsEmpty(t *testing.T) {
	t.Parallel()
	const longPoll = 300 * time.Millisecond
	h := newHarness(t, harnessOptions{LongPoll: longPoll})
	start := time.Now()
	r := h.request(t, http.MethodPost, queuePath("/claim-work/prov-lp%2Fwt-lp"), "", map[string]any{"workerGroup": "wg", "workerId": "w1"})
	elapsed := time.Since(start)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"tasks":[]}`, string(r.body))
	require.GreaterOrEqual(t, elapsed, queueapi.ShortestLongPoll(longPoll))
	require.Less(t, elapsed, 5*time.Second)
	// The call recorded the queue and the worker as seen.
	h.call(t, http.MethodGet, queuePath("/task-queues/prov-lp%2Fwt-lp"), nil, nil)
	h.call(t, http.MethodGet, queuePath("/provisioners/prov-lp/worker-types/wt-lp/workers/wg/w1"), nil, nil)
}

// TestClaimWorkEndsOnDrain: Drain releases waiting long-polls at once with
// no tasks, and later calls do not wait either.
func TestClaimWorkEndsOnDrain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{LongPoll: 30 * time.Second})
	const tq = "prov-drain/wt-drain"
	res := h.claimInBackground(tq, "w1")
	h.awaitSubscribed(t, tq)
	drained := time.Now()
	h.srv.Drain()
	h.srv.Drain() // safe to call twice
	select {
	case r := <-res:
		require.NoError(t, r.err)
		require.Empty(t, r.claims)
		require.Less(t, r.at.Sub(drained), 5*time.Second)
	case <-time.After(15 * time.Second):
		t.Fatal("claimWork still waiting 15 s after Drain")
	}
	start := time.Now()
	require.Empty(t, h.claimWork(t, tq, 1))
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestRawSlashRoutes: the wildcard routes accept
// <provisionerId>/<workerType> with a raw slash as well as %2F, with
// identical results.
func TestRawSlashRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	const tq = "prov-raw/wt-raw"
	first, second := newTaskID(), newTaskID()
	h.createTask(t, first, h.taskDef(tq, nil))
	h.createTask(t, second, h.taskDef(tq, nil))

	for _, route := range []string{"/pending/%s", "/task-queues/%s/counts"} {
		var escaped, slashed map[string]any
		h.call(t, http.MethodGet, queuePath(strings.Replace(route, "%s", "prov-raw%2Fwt-raw", 1)), nil, &escaped)
		h.call(t, http.MethodGet, queuePath(strings.Replace(route, "%s", "prov-raw/wt-raw", 1)), nil, &slashed)
		require.Equal(t, escaped, slashed, route)
		require.Equal(t, tq, slashed["taskQueueId"])
		require.EqualValues(t, 2, slashed["pendingTasks"])
	}

	claim := map[string]any{"workerGroup": "wg", "workerId": "w1"}
	var viaSlash, viaEscape tcclient.ClaimWorkResponse
	h.call(t, http.MethodPost, queuePath("/claim-work/prov-raw/wt-raw"), claim, &viaSlash)
	h.call(t, http.MethodPost, queuePath("/claim-work/prov-raw%2Fwt-raw"), claim, &viaEscape)
	require.Len(t, viaSlash.Tasks, 1)
	require.Len(t, viaEscape.Tasks, 1)
	// FIFO within a priority: the first created is claimed first.
	require.Equal(t, first, viaSlash.Tasks[0].Status.TaskID)
	require.Equal(t, second, viaEscape.Tasks[0].Status.TaskID)
	for _, c := range append(viaSlash.Tasks, viaEscape.Tasks...) {
		require.Equal(t, tq, c.Task.TaskQueueID)
		require.Equal(t, "prov-raw", c.Status.ProvisionerID)
		require.Equal(t, "wt-raw", c.Status.WorkerType)
	}

	var pending map[string]any
	h.call(t, http.MethodGet, queuePath("/pending/prov-raw/wt-raw"), nil, &pending)
	require.EqualValues(t, 0, pending["pendingTasks"])
}

// TestClaimExpiry: a claim that is not reclaimed expires exactly at its
// takenUntil, within the first resolveBackground pass at or after it:
// exception/claim-expired, plus a retry run while retries are left.
func TestClaimExpiry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		retries  int
		wantRuns []tcclient.Run // states and reasons only
		state    string
	}{
		{name: "with retries left", retries: 2, state: queue.StatePending, wantRuns: []tcclient.Run{
			{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonClaimExpired},
			{RunID: 1, State: queue.StatePending, ReasonCreated: queue.ReasonRetry},
		}},
		{name: "without retries", retries: 0, state: queue.StateException, wantRuns: []tcclient.Run{
			{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonClaimExpired},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const claimTimeout = 20 * time.Minute
			h := newHarness(t, harnessOptions{ClaimTimeout: claimTimeout})
			ctx := context.Background()
			const tq = "prov-exp/wt-exp"
			taskID := newTaskID()
			h.createTask(t, taskID, h.taskDef(tq, map[string]any{"retries": c.retries, "deadline": queue.NewTime(h.clock.Now().Add(3 * time.Hour)).String()}))
			claims := h.claimWork(t, tq, 1)
			require.Len(t, claims, 1)
			require.Equal(t, h.clock.Now().Add(claimTimeout), claims[0].TakenUntil.Time)

			h.clock.Advance(claimTimeout - time.Millisecond)
			n, err := h.resolveBackground(ctx, time.Minute)
			require.NoError(t, err)
			require.Zero(t, n, "a claim expired before its takenUntil")
			require.Equal(t, queue.StateRunning, h.status(t, taskID).State)

			h.clock.Advance(time.Millisecond)
			n, err = h.resolveBackground(ctx, time.Minute)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			st := h.status(t, taskID)
			require.Equal(t, c.state, st.State)
			require.Len(t, st.Runs, len(c.wantRuns))
			for i, want := range c.wantRuns {
				got := st.Runs[i]
				require.Equal(t, want.State, got.State, "run %d", i)
				require.Equal(t, want.ReasonCreated, got.ReasonCreated, "run %d", i)
				require.Equal(t, want.ReasonResolved, got.ReasonResolved, "run %d", i)
			}
			require.Equal(t, h.clock.Now(), st.Runs[0].Resolved.Time)

			// The worker's late report is refused; the retry is claimable.
			r := h.request(t, http.MethodPost, queuePath("/task/"+taskID+"/runs/0/completed"), "", nil)
			h.requireError(t, r, http.StatusConflict, api.CodeRequestConflict, "reportCompleted", map[string]string{"taskId": taskID, "runId": "0"})
			if c.retries > 0 {
				again := h.claimWork(t, tq, 1)
				require.Len(t, again, 1)
				require.Equal(t, 1, again[0].RunID)
			}
			n, err = h.resolveBackground(ctx, time.Minute)
			require.NoError(t, err)
			require.Zero(t, n, "a second pass found more to do")
		})
	}
}

// TestDeadlineResolution: unresolved tasks are resolved
// exception/deadline-exceeded once deadline + delay has passed, within the
// first resolveBackground pass at or after it, whatever their state.
func TestDeadlineResolution(t *testing.T) {
	t.Parallel()
	const delay = time.Minute
	h := newHarness(t, harnessOptions{ClaimTimeout: 4 * time.Hour})
	ctx := context.Background()
	const tq = "prov-dl/wt-dl"
	deadline := h.clock.Now().Add(time.Hour)
	edits := map[string]any{"deadline": queue.NewTime(deadline).String()}

	pending, running, unscheduled, completed := newTaskID(), newTaskID(), newTaskID(), newTaskID()
	h.createTask(t, running, h.taskDef(tq, edits))
	require.Len(t, h.claimWork(t, tq, 1), 1)
	h.createTask(t, completed, h.taskDef(tq, edits))
	require.Len(t, h.claimWork(t, tq, 1), 1)
	h.call(t, http.MethodPost, queuePath("/task/"+completed+"/runs/0/completed"), nil, nil)
	h.createTask(t, pending, h.taskDef(tq, edits))
	// A self-dependency keeps a task unscheduled until its deadline.
	h.createTask(t, unscheduled, h.taskDef(tq, map[string]any{"deadline": edits["deadline"], "dependencies": []string{unscheduled}}))
	require.Equal(t, queue.StateUnscheduled, h.status(t, unscheduled).State)

	h.clock.Advance(time.Hour + delay - time.Millisecond)
	n, err := h.resolveBackground(ctx, delay)
	require.NoError(t, err)
	require.Zero(t, n, "resolved before deadline + delay")

	h.clock.Advance(time.Millisecond)
	n, err = h.resolveBackground(ctx, delay)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	cases := []struct {
		name, taskID, reasonCreated string
	}{
		{"pending", pending, queue.ReasonScheduled},
		{"running", running, queue.ReasonScheduled},
		{"unscheduled", unscheduled, queue.ReasonException},
	}
	for _, c := range cases {
		st := h.status(t, c.taskID)
		require.Equal(t, queue.StateException, st.State, c.name)
		require.Len(t, st.Runs, 1, c.name)
		require.Equal(t, queue.ReasonDeadlineExceeded, st.Runs[0].ReasonResolved, c.name)
		require.Equal(t, c.reasonCreated, st.Runs[0].ReasonCreated, c.name)
	}
	require.Equal(t, queue.StateCompleted, h.status(t, completed).State)
	var counts tcclient.TaskQueueCountsResponse
	h.call(t, http.MethodGet, queuePath("/task-queues/prov-dl%2Fwt-dl/counts"), nil, &counts)
	require.Zero(t, counts.PendingTasks)
	require.Zero(t, counts.ClaimedTasks)
}

// TestQuarantinedWorker: a quarantined worker waits out the long-poll and
// gets no task from claimWork, and 409 from claimTask, while other workers
// take the work; lifting the quarantine restores it.
func TestQuarantinedWorker(t *testing.T) {
	t.Parallel()
	const longPoll = 300 * time.Millisecond
	h := newHarness(t, harnessOptions{LongPoll: longPoll})
	const tq = "prov-q/wt-q"
	workerPath := queuePath("/provisioners/prov-q/worker-types/wt-q/workers/wg/w1")

	// The first claimWork records the worker, which can then be quarantined.
	require.Empty(t, h.claimWork(t, tq, 1))
	until := queue.NewTime(h.clock.Now().Add(time.Hour)).String()
	var w map[string]any
	h.call(t, http.MethodPut, workerPath, map[string]any{"quarantineUntil": until, "quarantineInfo": "flaky disk"}, &w)
	require.Equal(t, until, w["quarantineUntil"])

	taskID := newTaskID()
	h.createTask(t, taskID, h.taskDef(tq, nil))
	start := time.Now()
	require.Empty(t, h.claimWork(t, tq, 1))
	require.GreaterOrEqual(t, time.Since(start), queueapi.ShortestLongPoll(longPoll), "a quarantined worker must wait out the long-poll")

	r := h.request(t, http.MethodPost, queuePath("/task/"+taskID+"/runs/0/claim"), "", map[string]any{"workerGroup": "wg", "workerId": "w1"})
	_, text := h.requireError(t, r, http.StatusConflict, api.CodeRequestConflict, "claimTask", map[string]string{"taskId": taskID, "runId": "0"})
	require.Contains(t, text, "quarantined")
	require.Equal(t, queue.StatePending, h.status(t, taskID).State)

	var other tcclient.ClaimWorkResponse
	h.call(t, http.MethodPost, queuePath("/claim-work/prov-q%2Fwt-q"), map[string]any{"workerGroup": "wg", "workerId": "w2"}, &other)
	require.Len(t, other.Tasks, 1)
	require.Equal(t, taskID, other.Tasks[0].Status.TaskID)

	// A quarantineUntil in the past lifts the quarantine.
	h.call(t, http.MethodPut, workerPath, map[string]any{"quarantineUntil": queue.NewTime(h.clock.Now().Add(-time.Minute)).String()}, nil)
	next := newTaskID()
	h.createTask(t, next, h.taskDef(tq, nil))
	claims := h.claimWork(t, tq, 1)
	require.Len(t, claims, 1)
	require.Equal(t, next, claims[0].Status.TaskID)
}

// TestMetrics: /metrics exposes request counts by method and status, the
// queue gauges read from the store, and claim/resolution counters.
func TestMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{Metrics: true})
	const tq = "prov-m/wt-m"
	done, waiting := newTaskID(), newTaskID()
	h.createTask(t, done, h.taskDef(tq, nil))
	h.createTask(t, waiting, h.taskDef(tq, nil))
	claims := h.claimWork(t, tq, 1)
	require.Len(t, claims, 1)
	h.call(t, http.MethodPost, queuePath("/task/"+done+"/runs/0/completed"), nil, nil)
	r := h.request(t, http.MethodGet, queuePath("/task/"+newTaskID()), "", nil)
	require.Equal(t, http.StatusNotFound, r.status)

	want := []string{
		`hopper_api_requests_total{method="createTask",status="200"} 2`,
		`hopper_api_requests_total{method="claimWork",status="200"} 1`,
		`hopper_api_requests_total{method="reportCompleted",status="200"} 1`,
		`hopper_api_requests_total{method="task",status="404"} 1`,
		`hopper_api_request_duration_seconds_count{method="createTask"} 2`,
		`hopper_pending_tasks{task_queue_id="prov-m/wt-m"} 1`,
		`hopper_claimed_tasks{task_queue_id="prov-m/wt-m"} 0`,
		// The worker that claimed asked for one task a moment ago and
		// holds none now.
		`hopper_workers_online{task_queue_id="prov-m/wt-m"} 1`,
		`hopper_workers_capacity{task_queue_id="prov-m/wt-m"} 1`,
		`hopper_workers_busy{task_queue_id="prov-m/wt-m"} 0`,
		`hopper_claims_total{task_queue_id="prov-m/wt-m"} 1`,
		`hopper_resolutions_total{reason="completed",state="completed"} 1`,
		// One call at a time: each ran in a transaction of its own.
		`hopper_store_transactions_total{kind="create"} 2`,
		`hopper_store_combined_calls_total{kind="create"} 2`,
		`hopper_store_transactions_total{kind="update"} 1`,
		`hopper_store_combined_calls_total{kind="update"} 1`,
	}
	// The queue gauges list the task queues the store knows, and a queue
	// first seen by a claimWork is written with the next batch of
	// touches, within a second.
	var text string
	require.Eventually(t, func() bool {
		r = h.request(t, http.MethodGet, "/metrics", "", nil)
		require.Equal(t, http.StatusOK, r.status)
		text = string(r.body)
		for _, line := range want {
			if !strings.Contains(text, line+"\n") {
				return false
			}
		}
		return true
	}, 5*time.Second, 50*time.Millisecond, "the metrics never showed every expected line")
	require.Contains(t, text, "go_goroutines ")
}
