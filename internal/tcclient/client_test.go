package tcclient_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/tcclient/tcclienttest"
)

func TestEscapePathParam(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"proj-x/builder":       "proj-x%2Fbuilder",
		"public/logs/live.log": "public%2Flogs%2Flive.log",
		"a b+c?d#e&f=g":        "a%20b%2Bc%3Fd%23e%26f%3Dg",
		"keep-_.!~*'()":        "keep-_.!~*'()",
		"é":                    "%C3%A9",
	} {
		require.Equal(t, want, tcclient.EscapePathParam(in), in)
	}
}

func TestHawkExt(t *testing.T) {
	t.Parallel()
	decode := func(t *testing.T, ext string) map[string]json.RawMessage {
		t.Helper()
		raw, err := base64.StdEncoding.DecodeString(ext)
		require.NoError(t, err)
		var out map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &out))
		return out
	}
	tests := []struct {
		name   string
		creds  *tcclient.Credentials
		scopes []string
		want   map[string]string
	}{
		{name: "permanent, unrestricted", creds: &tcclient.Credentials{ClientID: "a", AccessToken: "b"}},
		{name: "certificate embedded as object",
			creds: &tcclient.Credentials{ClientID: "a", AccessToken: "b", Certificate: `{"version":1,"seed":"x"}`},
			want:  map[string]string{"certificate": `{"version":1,"seed":"x"}`}},
		{name: "empty authorizedScopes kept", creds: &tcclient.Credentials{ClientID: "a", AccessToken: "b"},
			scopes: []string{}, want: map[string]string{"authorizedScopes": `[]`}},
		{name: "both", creds: &tcclient.Credentials{ClientID: "a", AccessToken: "b", Certificate: `{"v":1}`},
			scopes: []string{"s:1"}, want: map[string]string{"certificate": `{"v":1}`, "authorizedScopes": `["s:1"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ext, err := tcclient.HawkExt(tt.creds, tt.scopes)
			require.NoError(t, err)
			if tt.want == nil {
				require.Empty(t, ext)
				return
			}
			got := decode(t, ext)
			require.Len(t, got, len(tt.want))
			for k, v := range tt.want {
				require.JSONEq(t, v, string(got[k]), k)
			}
		})
	}
	_, err := tcclient.HawkExt(&tcclient.Credentials{Certificate: "not json"}, nil)
	require.Error(t, err)
}

func TestRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		statuses  []int
		wantCalls int32
		wantCode  int
	}{
		{name: "5xx retried until success", statuses: []int{500, 502, 200}, wantCalls: 3},
		{name: "5xx gives up after 5 retries", statuses: []int{500, 500, 500, 500, 500, 500, 500}, wantCalls: 6, wantCode: 500},
		{name: "4xx never retried", statuses: []int{409, 200}, wantCalls: 1, wantCode: 409},
		{name: "429 not retried by the client", statuses: []int{429, 200}, wantCalls: 1, wantCode: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				status := tt.statuses[min(int(n)-1, len(tt.statuses)-1)]
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				if status >= 400 {
					_, _ = io.WriteString(w, `{"code":"RequestConflict","message":"nope\n\n---\n\n* details"}`)
					return
				}
				_, _ = io.WriteString(w, `{"status":{"taskId":"x","state":"pending","runs":[]}}`)
			}))
			defer srv.Close()
			c := &tcclient.Client{RootURL: srv.URL, RetryDelay: time.Millisecond}
			st, err := c.Status(context.Background(), "x")
			require.Equal(t, tt.wantCalls, calls.Load())
			if tt.wantCode == 0 {
				require.NoError(t, err)
				require.Equal(t, "pending", st.State)
				return
			}
			require.Error(t, err)
			require.Equal(t, tt.wantCode, tcclient.StatusCode(err))
			var apiErr *tcclient.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, "nope", apiErr.Message[:4])
			require.NotContains(t, apiErr.Error(), "details")
		})
	}
}

func TestTimeJSON(t *testing.T) {
	t.Parallel()
	tm := tcclient.NewTime(time.Date(2024, 5, 1, 12, 34, 56, 789_400_000, time.FixedZone("x", 3600)))
	raw, err := json.Marshal(tm)
	require.NoError(t, err)
	require.Equal(t, `"2024-05-01T11:34:56.789Z"`, string(raw))
	var back tcclient.Time
	require.NoError(t, json.Unmarshal([]byte(`"2024-05-01T13:34:56+02:00"`), &back))
	require.Equal(t, "2024-05-01T11:34:56.000Z", back.String())
	// Omitted when zero.
	raw, err = json.Marshal(tcclient.Run{State: "pending"})
	require.NoError(t, err)
	require.NotContains(t, string(raw), "takenUntil")
}

func TestNewTaskID(t *testing.T) {
	t.Parallel()
	for range 200 {
		require.Regexp(t, `^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$`, tcclient.NewTaskID())
	}
}

func newTask(queue string, scopes ...string) *tcclient.TaskDefinition {
	now := time.Now()
	return &tcclient.TaskDefinition{
		TaskQueueID: queue,
		Created:     tcclient.NewTime(now),
		Deadline:    tcclient.NewTime(now.Add(time.Hour)),
		Scopes:      scopes,
		Payload:     json.RawMessage(`{}`),
		Metadata:    tcclient.TaskMetadata{Name: "t", Description: "d", Owner: "o@example.com", Source: "https://example.com"},
	}
}

// TestWorkerFlow walks a claim through reclaim, artifact upload, download
// redirect and resolution against the fake queue, checking that each call is
// signed with the right credentials.
func TestWorkerFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := tcclienttest.New(tcclienttest.Options{LongPoll: 200 * time.Millisecond})
	defer fake.Close()
	admin := fake.Client(fake.AddClient("admin", "*"))
	worker := fake.Client(fake.AddClient("worker", "queue:claim-work:prov/wt", "queue:worker-id:g/w"))

	// Nothing pending: an empty reply after the long poll.
	resp, err := worker.ClaimWork(ctx, "prov/wt", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 2})
	require.NoError(t, err)
	require.Empty(t, resp.Tasks)

	taskID := tcclient.NewTaskID()
	st, err := admin.CreateTask(ctx, taskID, newTask("prov/wt", "secret:thing"))
	require.NoError(t, err)
	require.Equal(t, tcclient.StatePending, st.State)

	resp, err = worker.ClaimWork(ctx, "prov/wt", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 2})
	require.NoError(t, err)
	require.Len(t, resp.Tasks, 1)
	claim := resp.Tasks[0]
	require.Equal(t, taskID, claim.Status.TaskID)
	require.NotEmpty(t, claim.Credentials.Certificate)
	require.Equal(t, []string{"secret:thing"}, claim.Task.Scopes)

	run := worker.WithCredentials(&claim.Credentials)
	rec, err := run.ReclaimTask(ctx, taskID, 0)
	require.NoError(t, err)
	require.NotEqual(t, claim.Credentials.ClientID, rec.Credentials.ClientID+"x")
	run = worker.WithCredentials(&rec.Credentials)

	// The worker's own credentials cannot resolve the run.
	_, err = worker.ReportCompleted(ctx, taskID, 0)
	require.Equal(t, http.StatusForbidden, tcclient.StatusCode(err))

	art, err := run.CreateArtifact(ctx, taskID, 0, "public/logs/x y.txt", &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, Expires: claim.Task.Expires, ContentType: "text/plain",
	})
	require.NoError(t, err)
	require.NotEmpty(t, art.PutURL)
	require.Contains(t, string(art.Raw), "putUrl")
	require.NoError(t, tcclient.BytesUpload(art.PutURL, "text/plain", "", []byte("hello")).Do(ctx))

	red, err := admin.GetLatestArtifact(ctx, taskID, "public/logs/x y.txt")
	require.NoError(t, err)
	require.Equal(t, "s3", red.StorageType)
	require.Equal(t, red.URL, red.Location)
	got, err := http.Get(red.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(got.Body)
	got.Body.Close()
	require.Equal(t, "hello", string(body))

	_, err = run.CreateArtifact(ctx, taskID, 0, "public/err", &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageError, Expires: claim.Task.Expires, Reason: tcclient.ArtifactFileMissing, Message: "gone",
	})
	require.NoError(t, err)
	_, err = admin.GetArtifact(ctx, taskID, 0, "public/err")
	var apiErr *tcclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 424, apiErr.StatusCode)
	require.Equal(t, tcclient.ArtifactFileMissing, apiErr.Reason)

	list, err := admin.ListArtifacts(ctx, taskID, 0, tcclient.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Artifacts, 2)

	st, err = run.ReportCompleted(ctx, taskID, 0)
	require.NoError(t, err)
	require.Equal(t, tcclient.StateCompleted, st.State)
	// Idempotent repeat; a different resolution conflicts.
	_, err = run.ReportCompleted(ctx, taskID, 0)
	require.NoError(t, err)
	_, err = run.ReportFailed(ctx, taskID, 0)
	require.Equal(t, http.StatusConflict, tcclient.StatusCode(err))
	_, err = run.ReclaimTask(ctx, taskID, 0)
	require.Equal(t, http.StatusConflict, tcclient.StatusCode(err))

	for _, r := range fake.Requests() {
		if r.Path == "/api/queue/v1/task/"+taskID+"/runs/0/completed" && r.Status == 200 {
			require.Equal(t, rec.Credentials.ClientID, r.ClientID)
			require.True(t, r.HasCertificate)
		}
	}
}

func TestUploadRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		data, _ := io.ReadAll(r.Body)
		require.Equal(t, "gzip", r.Header.Get("Content-Encoding"))
		require.Equal(t, "text/plain", r.Header.Get("Content-Type"))
		require.Equal(t, "abc", string(data))
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	u := tcclient.BytesUpload(srv.URL+"/x?sig=secret", "text/plain", "gzip", []byte("abc"))
	u.RetryDelay = time.Millisecond
	require.NoError(t, u.Do(context.Background()))
	require.EqualValues(t, 3, calls.Load())

	u.MaxRetries = -1
	u.PutURL = srv.URL + "/missing?sig=secret"
	calls.Store(-10)
	err := u.Do(context.Background())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret")
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	type seen struct{ method, path, query, body, auth string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(body), r.Header.Get("Authorization")}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	ctx := context.Background()
	c := &tcclient.Client{RootURL: srv.URL + "/", Credentials: &tcclient.Credentials{ClientID: "me", AccessToken: "tok"}}
	tests := []struct {
		name string
		call func() error
		want seen
	}{
		{"taskQueueCounts", func() error { _, err := c.TaskQueueCounts(ctx, "prov/wt"); return err },
			seen{method: "GET", path: "/api/queue/v1/task-queues/prov%2Fwt/counts"}},
		{"listTaskGroup", func() error {
			_, err := c.ListTaskGroup(ctx, "G", tcclient.ListOptions{ContinuationToken: "a b", Limit: 7})
			return err
		}, seen{method: "GET", path: "/api/queue/v1/task-group/G/list", query: "continuationToken=a+b&limit=7"}},
		{"cancelTask", func() error { _, err := c.CancelTask(ctx, "T"); return err },
			seen{method: "POST", path: "/api/queue/v1/task/T/cancel"}},
		{"rerunTask", func() error { _, err := c.RerunTask(ctx, "T"); return err },
			seen{method: "POST", path: "/api/queue/v1/task/T/rerun"}},
		{"claimTask", func() error {
			_, err := c.ClaimTask(ctx, "T", 2, &tcclient.ClaimTaskRequest{WorkerGroup: "g", WorkerID: "w"})
			return err
		}, seen{method: "POST", path: "/api/queue/v1/task/T/runs/2/claim", body: `{"workerGroup":"g","workerId":"w"}`}},
		{"reportException", func() error {
			_, err := c.ReportException(ctx, "T", 0, tcclient.ReasonSuperseded)
			return err
		}, seen{method: "POST", path: "/api/queue/v1/task/T/runs/0/exception", body: `{"reason":"superseded"}`}},
		{"listArtifacts", func() error { _, err := c.ListArtifacts(ctx, "T", 1, tcclient.ListOptions{}); return err },
			seen{method: "GET", path: "/api/queue/v1/task/T/runs/1/artifacts"}},
		{"generic Do", func() error { return c.Do(ctx, "GET", "/ping", nil, nil, nil) },
			seen{method: "GET", path: "/api/queue/v1/ping"}},
	}
	for _, tt := range tests {
		require.NoError(t, tt.call(), tt.name)
		require.Regexp(t, `^Hawk id="me", ts="\d+", nonce="[^"]+", mac="[^"]+"$`, got.auth, tt.name)
		got.auth = ""
		require.Equal(t, tt.want, got, tt.name)
	}
}
