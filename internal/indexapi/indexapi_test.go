package indexapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// setup serves the API over a fresh SQLite store; it returns a root
// client and an anonymous one.
func setup(t *testing.T) (root, anon *tcclient.Client) {
	t.Helper()
	root = serve(t, apitest.SQLite(t))
	return root, &tcclient.Client{RootURL: root.RootURL, MaxRetries: -1}
}

func apiCode(t *testing.T, err error) (int, string) {
	t.Helper()
	var apiErr *tcclient.APIError
	require.True(t, errors.As(err, &apiErr), "want an API error, got %v", err)
	return apiErr.StatusCode, apiErr.Code
}

func TestInsertFindListDelete(t *testing.T) {
	t.Parallel()
	root, anon := setup(t)
	ctx := context.Background()
	taskA, taskB := tcclient.NewTaskID(), tcclient.NewTaskID()
	expires := tcclient.NewTime(time.Now().Add(time.Hour))

	got, err := root.InsertIndexedTask(ctx, "proj.main.latest", &tcclient.InsertIndexedTaskRequest{TaskID: taskA, Rank: 2, Data: json.RawMessage(`{"a":1}`), Expires: expires})
	require.NoError(t, err)
	require.Equal(t, taskA, got.TaskID)
	got, err = root.InsertIndexedTask(ctx, "proj.main.latest", &tcclient.InsertIndexedTaskRequest{TaskID: taskB, Rank: 1, Expires: expires})
	require.NoError(t, err)
	require.Equal(t, taskA, got.TaskID, "a lower rank answers the entry kept")

	found, err := anon.FindIndexedTask(ctx, "proj.main.latest")
	require.NoError(t, err, "the anonymous role may find tasks")
	require.Equal(t, "proj.main.latest", found.Namespace)
	require.JSONEq(t, `{"a":1}`, string(found.Data))
	require.True(t, expires.Equal(found.Expires.Time))

	ns, err := anon.ListIndexNamespaces(ctx, "", tcclient.ListOptions{})
	require.NoError(t, err)
	require.Len(t, ns.Namespaces, 1)
	require.Equal(t, "proj", ns.Namespaces[0].Namespace)
	list, err := anon.ListIndexedTasks(ctx, "proj.main", tcclient.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)

	_, err = anon.InsertIndexedTask(ctx, "proj.x", &tcclient.InsertIndexedTaskRequest{TaskID: taskA, Expires: expires})
	status, code := apiCode(t, err)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "InsufficientScopes", code)
	err = anon.DeleteIndexedTask(ctx, "proj.main.latest")
	status, _ = apiCode(t, err)
	require.Equal(t, http.StatusForbidden, status)

	require.NoError(t, root.DeleteIndexedTask(ctx, "proj.main.latest"))
	_, err = anon.FindIndexedTask(ctx, "proj.main.latest")
	status, code = apiCode(t, err)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "ResourceNotFound", code)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	root, _ := setup(t)
	ctx := context.Background()
	expires := tcclient.NewTime(time.Now().Add(time.Hour))
	for _, tc := range []struct {
		name string
		call func() error
		code string
	}{
		{"path with an empty word", func() error { _, err := root.FindIndexedTask(ctx, "a..b"); return err }, "InvalidRequestArguments"},
		{"path with a space", func() error { _, err := root.FindIndexedTask(ctx, "a b"); return err }, "InvalidRequestArguments"},
		{"namespace ending in a dot", func() error { _, err := root.ListIndexedTasks(ctx, "a.", tcclient.ListOptions{}); return err }, "InvalidRequestArguments"},
		{"insert at the root", func() error {
			_, err := root.InsertIndexedTask(ctx, "", &tcclient.InsertIndexedTaskRequest{TaskID: tcclient.NewTaskID(), Expires: expires})
			return err
		}, ""},
		{"insert a bad taskId", func() error {
			_, err := root.InsertIndexedTask(ctx, "a.b", &tcclient.InsertIndexedTaskRequest{TaskID: "nope", Expires: expires})
			return err
		}, "InputValidationError"},
		{"bad continuation token", func() error {
			_, err := root.ListIndexNamespaces(ctx, "a", tcclient.ListOptions{ContinuationToken: "!!"})
			return err
		}, "InputError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			status, code := apiCode(t, err)
			if tc.code == "" {
				require.GreaterOrEqual(t, status, 400, "refused")
				require.Less(t, status, 500)
				return
			}
			require.Equal(t, http.StatusBadRequest, status)
			require.Equal(t, tc.code, code)
		})
	}
}
