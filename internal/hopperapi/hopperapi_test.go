package hopperapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/hopperapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestListTasks: tasks of every queue are found by state, queue, group,
// name and creation time, newest first, in pages; a malformed filter or
// limit is refused with InvalidRequestArguments and the pattern it broke.
func TestListTasks(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		return hopperapi.Routes(hopperapi.Deps{Store: s.Store, Version: "test"})
	}})
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second)
	ids := map[string]string{}
	for i, name := range []string{"Build linux", "build windows", "lint"} {
		id := tcclient.NewTaskID()
		ids[name] = id
		q := "hopperapi/a"
		if name == "lint" {
			q = "hopperapi/b"
		}
		created := start.Add(time.Duration(i) * time.Second)
		_, err := s.Root.CreateTaskDocument(ctx, id, map[string]any{
			"taskQueueId": q, "taskGroupId": ids["Build linux"], "created": created.Format(time.RFC3339), "deadline": created.Add(time.Hour).Format(time.RFC3339),
			"payload": map[string]any{}, "metadata": map[string]any{"name": name, "description": "d", "owner": "a@b.c", "source": "https://example.com"},
		})
		require.NoError(t, err)
	}
	_, err := s.Root.ClaimWork(ctx, "hopperapi/b", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)

	list := func(query url.Values) (int, hopperapi.ListTasksResponse, []byte) {
		t.Helper()
		status, body := s.Call(t, nil, nil, http.MethodGet, hopperapi.BasePath+"/tasks?"+query.Encode(), nil)
		var out hopperapi.ListTasksResponse
		if status == http.StatusOK {
			require.NoError(t, json.Unmarshal(body, &out))
		}
		return status, out, body
	}
	names := func(r hopperapi.ListTasksResponse) []string {
		var out []string
		for _, e := range r.Tasks {
			out = append(out, e.Task.Metadata.Name)
		}
		return out
	}
	cases := []struct {
		query url.Values
		want  []string
	}{
		{url.Values{}, []string{"lint", "build windows", "Build linux"}},
		{url.Values{"state": {"running"}}, []string{"lint"}},
		{url.Values{"state": {"pending"}, "taskQueueId": {"hopperapi/a"}}, []string{"build windows", "Build linux"}},
		{url.Values{"name": {"BUILD"}}, []string{"build windows", "Build linux"}},
		{url.Values{"taskGroupId": {ids["Build linux"]}, "createdFrom": {start.Add(time.Second).Format(time.RFC3339)}}, []string{"lint", "build windows"}},
		{url.Values{"createdTo": {start.Add(time.Second).Format(time.RFC3339)}}, []string{"Build linux"}},
		{url.Values{"state": {"completed"}}, nil},
	}
	for _, c := range cases {
		status, got, body := list(c.query)
		require.Equal(t, http.StatusOK, status, string(body))
		require.Equal(t, c.want, names(got), c.query.Encode())
	}

	// Pages, newest first, to the end.
	var paged []string
	query := url.Values{"limit": {"2"}}
	for {
		status, got, body := list(query)
		require.Equal(t, http.StatusOK, status, string(body))
		paged = append(paged, names(got)...)
		if got.ContinuationToken == "" {
			break
		}
		query.Set("continuationToken", got.ContinuationToken)
	}
	require.Equal(t, []string{"lint", "build windows", "Build linux"}, paged)

	for _, bad := range []url.Values{
		{"state": {"done"}},
		{"taskQueueId": {"no-slash"}},
		{"createdFrom": {"yesterday"}},
		{"createdFrom": {start.Format(time.RFC3339)}, "createdTo": {start.Format(time.RFC3339)}},
		{"limit": {"0"}},
		{"limit": {"1001"}},
	} {
		status, _, body := list(bad)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", bad.Encode(), body)
		var e struct{ Code string }
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, "InvalidRequestArguments", e.Code, bad.Encode())
	}
}
