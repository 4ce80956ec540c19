package flowapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/flowapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestFlowKeys: a task queue's flow keys are answered with their policy
// and their pending, running and held-back tasks, at both spellings of
// the task queue's path, to a caller with the scope of the queue's
// pending count (which the anonymous role has, as in Taskcluster).
func TestFlowKeys(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		return flowapi.Routes(flowapi.Deps{Store: s.Store, Version: "test"})
	}})
	ctx := context.Background()
	const q = "flow-test/keys"
	now := time.Now().UTC()
	for _, key := range []string{"deploy", "deploy", "deploy", "docs"} {
		_, err := s.Root.CreateTaskDocument(ctx, tcclient.NewTaskID(), map[string]any{
			"taskQueueId": q, "created": now.Format(time.RFC3339), "deadline": now.Add(time.Hour).Format(time.RFC3339),
			"payload": map[string]any{}, "metadata": map[string]any{"name": "t", "description": "d", "owner": "a@b.c", "source": "https://example.com"},
			"extra": map[string]any{"flow": map[string]any{"key": key, "limit": 1}},
		})
		require.NoError(t, err)
	}
	claimed, err := s.Root.ClaimWork(ctx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 4})
	require.NoError(t, err)
	require.Len(t, claimed.Tasks, 2, "one task a key")

	root := &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}
	want := flowapi.Response{TaskQueueID: q, Keys: []flowapi.Key{
		{Key: "deploy", Limit: 1, Pending: 2, Running: 1, Limited: 2},
		{Key: "docs", Limit: 1, Running: 1},
	}}
	for _, path := range []string{"/task-queues/" + tcclient.EscapePathParam(q) + "/keys", "/task-queues/" + q + "/keys"} {
		status, body := s.Call(t, root, []string{"queue:pending-count:" + q}, http.MethodGet, flowapi.BasePath+path, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var got flowapi.Response
		require.NoError(t, json.Unmarshal(body, &got))
		require.Equal(t, want, got, path)
	}
	status, body := s.Call(t, nil, nil, http.MethodGet, flowapi.BasePath+"/task-queues/flow-test/none/keys", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	require.JSONEq(t, `{"taskQueueId":"flow-test/none","keys":[]}`, string(body))
	for _, r := range flowapi.Routes(flowapi.Deps{Store: s.Store}) {
		if r.Name == "flowKeys" {
			require.Equal(t, `"queue:pending-count:<taskQueueId>"`, r.Scopes)
		}
	}
}
