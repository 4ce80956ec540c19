package tcproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/tcclient/tcclienttest"
	"github.com/hopper-ci/hopper/internal/worker/tcproxy"
)

func TestProxySignsWithRunCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := tcclienttest.New(tcclienttest.Options{LongPoll: 100 * time.Millisecond})
	defer fake.Close()
	admin := fake.Client(fake.AddClient("admin", "*"))
	worker := fake.Client(fake.AddClient("worker", "queue:claim-work:p/w", "queue:worker-id:g/w"))
	other := tcclient.NewTaskID()
	taskID := tcclient.NewTaskID()
	for _, id := range []string{taskID, other} {
		now := time.Now()
		_, err := admin.CreateTask(ctx, id, &tcclient.TaskDefinition{
			TaskQueueID: "p/w", Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
			Scopes: []string{"queue:get-task:" + other}, Payload: json.RawMessage(`{}`),
			Metadata: tcclient.TaskMetadata{Name: "n", Description: "d", Owner: "o@x.com", Source: "https://x"},
		})
		require.NoError(t, err)
	}
	resp, err := worker.ClaimWork(ctx, "p/w", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, resp.Tasks, 1)
	claim := resp.Tasks[0]
	id := claim.Status.TaskID
	authorized := append(append([]string{}, claim.Task.Scopes...), "queue:create-artifact:"+id+"/0")

	p, err := tcproxy.Start(tcproxy.Options{RootURL: fake.URL, Credentials: claim.Credentials,
		AuthorizedScopes: authorized, RetryDelay: time.Millisecond})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(time.Second)) }()

	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		r, err := http.Get(p.URL() + path)
		require.NoError(t, err)
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r, b
	}
	// Both route forms reach the queue, signed by the run's credentials
	// with authorizedScopes applied.
	for _, path := range []string{"/api/queue/v1/task/" + other, "/queue/v1/task/" + other} {
		r, body := get(path)
		require.Equal(t, http.StatusOK, r.StatusCode, string(body))
		require.Equal(t, tcproxy.Version, r.Header.Get("X-Taskcluster-Proxy-Version"))
		require.Equal(t, fake.URL+"/api/queue/v1/task/"+other, r.Header.Get("X-Taskcluster-Endpoint"))
	}
	last := fake.Requests()[len(fake.Requests())-1]
	require.Equal(t, claim.Credentials.ClientID, last.ClientID)
	require.Equal(t, authorized, last.AuthorizedScopes)
	require.True(t, last.HasCertificate)

	// The task cannot resolve its own run through the proxy: the
	// authorizedScopes exclude queue:resolve-task.
	r, err := http.Post(p.URL()+"/api/queue/v1/task/"+id+"/runs/0/completed", "application/json", nil)
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusForbidden, r.StatusCode)

	// Unknown route shape.
	r, _ = get("/nothing")
	require.Equal(t, http.StatusNotFound, r.StatusCode)

	// After a reclaim the worker swaps credentials; also PUT /credentials
	// works.
	rec, err := worker.WithCredentials(&claim.Credentials).ReclaimTask(ctx, id, 0)
	require.NoError(t, err)
	body, _ := json.Marshal(rec.Credentials)
	req, _ := http.NewRequest(http.MethodPut, p.URL()+"/credentials", bytes.NewReader(body))
	r, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusOK, r.StatusCode)
	r, _ = get("/api/queue/v1/task/" + other)
	require.Equal(t, http.StatusOK, r.StatusCode)
	last = fake.Requests()[len(fake.Requests())-1]
	require.Equal(t, rec.Credentials.ClientID, last.ClientID)

	// Upstream 5xx is retried.
	fake.InjectFault("task", 500, 503)
	r, _ = get("/api/queue/v1/task/" + other)
	require.Equal(t, http.StatusOK, r.StatusCode)

	// POST /bewit answers with a signed URL.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err = noRedirect.Post(p.URL()+"/bewit", "text/plain", bytes.NewReader([]byte(fake.URL+"/api/queue/v1/task/"+other)))
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusSeeOther, r.StatusCode)
	require.Contains(t, r.Header.Get("Location"), "bewit=")
}

// TestProxyIDTokenNeedsAnAudience: GET /id-token without ?audience= is
// refused by the proxy itself (the Auth call it makes is tested end to end
// in internal/e2e).
func TestProxyIDTokenNeedsAnAudience(t *testing.T) {
	t.Parallel()
	p, err := tcproxy.Start(tcproxy.Options{RootURL: "http://127.0.0.1:1", TaskID: tcclient.NewTaskID(),
		Credentials: tcclient.Credentials{ClientID: "c", AccessToken: "t"}})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(time.Second)) }()
	r, err := http.Get(p.URL() + "/id-token")
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusBadRequest, r.StatusCode)
}
