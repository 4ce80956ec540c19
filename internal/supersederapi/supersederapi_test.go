package supersederapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/supersederapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

type allowAll struct{}

func (allowAll) Authorize(*api.Call, string, map[string]any) error { return nil }

type noCredentials struct{}

func (noCredentials) TaskCredentials(string, int, string, string, time.Time, time.Time, []string) (queueapi.Credentials, error) {
	return queueapi.Credentials{}, nil
}

// TestListEndpoint serves the built-in superseder from a real SQLite store
// and checks the answers of docs/contract/worker.md §5.9 and the package documentation.
func TestListEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hopper.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	epoch := storetest.Epoch
	now := epoch.Add(100 * time.Second)
	ids := map[string]string{}
	create := func(name, taskQueueID string, created int, routes ...string) string {
		id := tcclient.NewTaskID()
		ids[name] = id
		at := epoch.Add(time.Duration(created) * time.Second)
		def := storetest.NewTask(taskQueueID, at, func(tk *queue.Task) { tk.Routes = routes })
		_, err := st.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: def, Now: at})
		require.NoError(t, err)
		return id
	}
	update := func(id string, at int, fn func(tk *queue.TaskState, now time.Time, tr *queue.Transition) error) {
		when := epoch.Add(time.Duration(at) * time.Second)
		_, err := st.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: when, Apply: func(tk *queue.TaskState, tr *queue.Transition) error {
			return fn(tk, when, tr)
		}})
		require.NoError(t, err)
	}
	claim := func(tk *queue.TaskState, now time.Time, tr *queue.Transition) error {
		return tk.Claim(0, "wg", "w1", now, now.Add(time.Hour), tr)
	}
	create("old", "prov/wt", 5, "coalesce.v1.k")
	req := create("req", "prov/wt", 10, "coalesce.v1.k")
	create("p1", "prov/wt", 20, "other", "coalesce.v1.k")
	create("p2", "prov/wt", 30, "coalesce.v1.k")
	create("otherkey", "prov/wt", 31, "coalesce.v1.kk")
	create("otherq", "prov/other", 32, "coalesce.v1.k")
	done := create("done", "prov/wt", 33, "coalesce.v1.k")
	noroute := create("noroute", "prov/wt", 34)
	slash := create("slash", "prov/wt", 35, "coalesce.v1.a/b")
	update(req, 50, claim)
	update(done, 51, claim)
	update(done, 52, func(tk *queue.TaskState, now time.Time, tr *queue.Transition) error {
		return tk.ReportCompleted(0, now, tr)
	})

	serve := func(opts supersederapi.Deps) string {
		opts.Store = st
		clock := testclock.New(now)
		queueSrv, err := queueapi.New(queueapi.Options{Config: queueapi.Config{RootURL: "http://example"}, Store: st, Clock: clock, Issuer: noCredentials{}})
		require.NoError(t, err)
		srv, err := api.New(api.Options{Clock: clock, Authorizer: allowAll{}, Routes: append(queueapi.Routes(queueapi.Deps{Server: queueSrv}), supersederapi.Routes(opts)...)})
		require.NoError(t, err)
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		return hs.URL
	}
	def := serve(supersederapi.Deps{})
	capped := serve(supersederapi.Deps{MaxTasks: 2})
	thresholds := serve(supersederapi.Deps{DefaultAge: time.Minute, DefaultSize: 10})

	full := []string{ids["old"], req, ids["p1"], ids["p2"]}
	tests := []struct {
		name   string
		base   string
		path   string
		status int
		want   []string
		code   string
	}{
		{name: "everything pending plus the running requester", base: def, path: "/list/0/0/k?taskId=" + req, status: 200, want: full},
		{name: "both thresholds exceeded", base: def, path: "/list/94/3/k?taskId=" + req, status: 200, want: full},
		{name: "age equal to the wait", base: def, path: "/list/95/3/k?taskId=" + req, status: 200, want: []string{}},
		{name: "size equal to the count", base: def, path: "/list/0/4/k?taskId=" + req, status: 200, want: []string{}},
		{name: "huge thresholds saturate", base: def, path: "/list/99999999999999999999999/99999999999999999999/k?taskId=" + req, status: 200, want: []string{}},
		{name: "short form with zero defaults", base: def, path: "/list/k?taskId=" + req, status: 200, want: full},
		{name: "short form with server thresholds", base: thresholds, path: "/list/k?taskId=" + req, status: 200, want: []string{}},
		{name: "capped to the requester and the newest", base: capped, path: "/list/0/0/k?taskId=" + req, status: 200, want: []string{req, ids["p2"]}},
		{name: "pending requester; running tasks are no candidates", base: def, path: "/list/0/0/k?taskId=" + ids["p1"], status: 200,
			want: []string{ids["old"], ids["p1"], ids["p2"]}},
		{name: "other queue only sees its own", base: def, path: "/list/0/0/k?taskId=" + ids["otherq"], status: 200, want: []string{ids["otherq"]}},
		{name: "requester without the route", base: def, path: "/list/0/0/k?taskId=" + noroute, status: 200, want: []string{}},
		{name: "requester under another key", base: def, path: "/list/0/0/kk?taskId=" + req, status: 200, want: []string{}},
		{name: "escaped slash in the key", base: def, path: "/list/0/0/a%2Fb?taskId=" + slash, status: 200, want: []string{slash}},
		{name: "age not an integer", base: def, path: "/list/1.5/0/k?taskId=" + req, status: 404, code: api.CodeResourceNotFound},
		{name: "negative size", base: def, path: "/list/0/-1/k?taskId=" + req, status: 404, code: api.CodeResourceNotFound},
		{name: "age a word", base: def, path: "/list/hour/5/k?taskId=" + req, status: 404, code: api.CodeResourceNotFound},
		{name: "no taskId", base: def, path: "/list/0/0/k", status: 400, code: api.CodeInvalidRequestArguments},
		{name: "bad taskId", base: def, path: "/list/0/0/k?taskId=nope", status: 400, code: api.CodeInvalidRequestArguments},
		{name: "unknown taskId", base: def, path: "/list/0/0/k?taskId=" + tcclient.NewTaskID(), status: 404, code: api.CodeResourceNotFound},
		{name: "unknown query parameter", base: def, path: "/list/0/0/k?taskId=" + req + "&x=1", status: 400, code: api.CodeInvalidRequestArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := http.Get(tt.base + "/api/superseder/v1" + tt.path)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tt.status, resp.StatusCode, string(body))
			if tt.code != "" {
				var e struct{ Code string }
				require.NoError(t, json.Unmarshal(body, &e))
				require.Equal(t, tt.code, e.Code)
				return
			}
			var raw map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &raw))
			require.Len(t, raw, 1, "exactly {\"supersedes\": [...]}: %s", body)
			var got supersederapi.Answer
			require.NoError(t, json.Unmarshal(body, &got))
			require.Equal(t, tt.want, got.Supersedes)
		})
	}
	resp, err := http.Get(def + "/api/superseder/v1/ping")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
