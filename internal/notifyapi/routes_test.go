package notifyapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/notifyapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestNotifyRoutes: a request to send is stored and answered 200 with the
// notification's id (which notification/<id> then describes), the same
// request again 204; each needs the scope naming its address; the
// denylist is managed with its scope and refuses its addresses with
// DenylistedAddress; a task's notify routes' notifications are listed;
// malformed addresses and unknown ids get Taskcluster's errors.
func TestNotifyRoutes(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		return notifyapi.Routes(notifyapi.Deps{Store: s.Store, Version: "test"})
	}})
	ctx := context.Background()
	root := &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}
	call := func(scopes []string, method, path string, body any) (int, map[string]any) {
		t.Helper()
		status, raw := s.Call(t, root, scopes, method, notifyapi.BasePath+path, body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return status, out
	}
	email := func(to string) map[string]any {
		return map[string]any{"address": to, "subject": "hello", "content": "a message"}
	}

	status, _ := call([]string{"notify:email:other@example.com"}, http.MethodPost, "/email", email("dev@example.com"))
	require.Equal(t, http.StatusForbidden, status)
	id, dup, err := s.Root.SendNotification(ctx, "email", email("dev@example.com"))
	require.NoError(t, err)
	require.False(t, dup)
	require.NotEmpty(t, id)
	_, dup, err = s.Root.SendNotification(ctx, "email", email("dev@example.com"))
	require.NoError(t, err)
	require.True(t, dup, "the same request again")
	n, err := s.Root.Notification(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "email", n.Channel)
	require.Equal(t, "dev@example.com", n.Target)
	require.Equal(t, "pending", n.State)
	status, body := call(nil, http.MethodGet, "/notification/no-such-id", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "ResourceNotFound", body["code"])
	status, body = call(nil, http.MethodPost, "/email", email("not an address"))
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "InputValidationError", body["code"], "the schema's format")

	// The denylist.
	address := map[string]string{"notificationType": "email", "notificationAddress": "deny@example.com"}
	status, _ = call([]string{"notify:email:*"}, http.MethodPost, "/denylist/add", address)
	require.Equal(t, http.StatusForbidden, status, "managing the denylist needs its scope")
	status, _ = call([]string{"notify:manage-denylist"}, http.MethodPost, "/denylist/add", address)
	require.Equal(t, http.StatusOK, status)
	status, body = call(nil, http.MethodGet, "/denylist/list", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []any{map[string]any{"notificationType": "email", "notificationAddress": "deny@example.com"}}, body["addresses"])
	status, body = call(nil, http.MethodPost, "/email", email("deny@example.com"))
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "DenylistedAddress", body["code"])
	status, _ = call(nil, http.MethodDelete, "/denylist/delete", address)
	require.Equal(t, http.StatusOK, status)
	_, _, err = s.Root.SendNotification(ctx, "email", email("deny@example.com"))
	require.NoError(t, err, "no longer denylisted")

	// A task's notifications, from its routes.
	taskID := tcclient.NewTaskID()
	now := time.Now().UTC()
	_, err = s.Root.CreateTaskDocument(ctx, taskID, map[string]any{
		"taskQueueId": "notifyapi/test", "created": now.Format(time.RFC3339), "deadline": now.Add(time.Hour).Format(time.RFC3339),
		"routes":  []string{"notify.email.ops@example.com.on-defined"},
		"payload": map[string]any{}, "metadata": map[string]any{"name": "t", "description": "d", "owner": "a@b.c", "source": "https://example.com"},
	})
	require.NoError(t, err)
	list, err := s.Root.TaskNotifications(ctx, taskID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "ops@example.com", list[0].Target)
	require.Equal(t, "task-defined", list[0].Event)
	list, err = s.Root.TaskNotifications(ctx, tcclient.NewTaskID())
	require.NoError(t, err)
	require.Empty(t, list)
}
