package secretsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/secretsapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// setup serves the API with the secrets routes over a fresh SQLite store,
// logging at debug level into the returned buffer.
func setup(t *testing.T) (*tcclient.Client, store.Store, *e2e.SyncBuffer) {
	t.Helper()
	logs := &e2e.SyncBuffer{}
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Routes: func(s *apitest.Server) []api.Route {
			return secretsapi.Routes(secretsapi.Deps{Store: s.Store, Sealer: s.Security.Sealer, Caller: s.Security.Authorizer.Caller, Logger: s.Logger})
		},
	})
	return srv.Root, srv.Store, logs
}

func status(t *testing.T, err error) int {
	t.Helper()
	var apiErr *tcclient.APIError
	require.True(t, errors.As(err, &apiErr), "want an API error, got %v", err)
	return apiErr.StatusCode
}

func TestSecretsLifecycle(t *testing.T) {
	t.Parallel()
	root, st, logs := setup(t)
	ctx := context.Background()
	const value = `{"password":"pa55-w0rd-xyz"}`
	expires := tcclient.NewTime(time.Now().Add(time.Hour))
	require.NoError(t, root.SetSecret(ctx, "proj/db", &tcclient.Secret{Secret: json.RawMessage(value), Expires: expires}))

	stored, err := st.GetSecret(ctx, "proj/db")
	require.NoError(t, err)
	require.NotContains(t, stored.Sealed, "pa55", "sealed at rest")

	got, err := root.GetSecret(ctx, "proj/db")
	require.NoError(t, err)
	require.JSONEq(t, value, string(got.Secret))
	require.True(t, expires.Equal(got.Expires.Time))

	require.NoError(t, root.SetSecret(ctx, "proj/old", &tcclient.Secret{Secret: json.RawMessage(`{}`), Expires: tcclient.NewTime(time.Now().Add(-time.Minute))}))
	_, err = root.GetSecret(ctx, "proj/old")
	require.Equal(t, http.StatusNotFound, status(t, err), "expired secrets are not found")
	list, err := root.ListSecrets(ctx, tcclient.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"proj/db"}, list.Secrets)

	anon := &tcclient.Client{RootURL: root.RootURL, MaxRetries: -1}
	_, err = anon.GetSecret(ctx, "proj/db")
	require.Equal(t, http.StatusForbidden, status(t, err))
	_, err = anon.ListSecrets(ctx, tcclient.ListOptions{})
	require.Equal(t, http.StatusForbidden, status(t, err))

	require.NoError(t, root.RemoveSecret(ctx, "proj/db"))
	require.NoError(t, root.RemoveSecret(ctx, "proj/db"), "removing twice succeeds")
	_, err = root.GetSecret(ctx, "proj/db")
	require.Equal(t, http.StatusNotFound, status(t, err))

	require.Contains(t, logs.String(), "secret created")
	require.NotContains(t, logs.String(), "pa55")
}

// TestErrorBodiesOmitTheValue: refused and invalid sets echo the request
// with the value replaced, as Taskcluster's cleanPayload does.
func TestErrorBodiesOmitTheValue(t *testing.T) {
	t.Parallel()
	root, _, logs := setup(t)
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"anonymous", `{"secret": {"token": "leak-me-1"}, "expires": "2099-01-01T00:00:00.000Z"}`, http.StatusForbidden},
		{"not an object", `{"secret": "leak-me-2", "expires": "2099-01-01T00:00:00.000Z"}`, http.StatusForbidden},
		{"extra field", `{"secret": {"a": 1}, "expires": "2099-01-01T00:00:00.000Z", "note": "leak-me-3"}`, http.StatusForbidden},
		{"not JSON", `{"secret": "leak-me-4"`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPut, root.RootURL+"/api/secrets/v1/secret/proj%2Fx", strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode, "%s", body)
			require.NotContains(t, string(body), "leak-me")
			var e struct {
				RequestInfo struct {
					Payload map[string]any `json:"payload"`
				} `json:"requestInfo"`
			}
			require.NoError(t, json.Unmarshal(body, &e))
			if v, ok := e.RequestInfo.Payload["secret"]; ok {
				require.Equal(t, "(OMITTED)", v)
			}
		})
	}
	// And with credentials, the schema's refusal of a string value.
	err := root.SetSecret(context.Background(), "proj/x", &tcclient.Secret{Secret: json.RawMessage(`"leak-me-5"`), Expires: tcclient.NewTime(time.Now().Add(time.Hour))})
	require.Equal(t, http.StatusBadRequest, status(t, err))
	require.NotContains(t, err.Error(), "leak-me")
	require.NotContains(t, logs.String(), "leak-me")
}
