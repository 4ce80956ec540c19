package secretsapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/secretsapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

const rootToken = "secretsapi-test-root-token-0123456789abcdef"

// syncBuffer collects the server's log.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// setup serves the API with the secrets routes over a fresh SQLite store,
// logging at debug level into the returned buffer.
func setup(t *testing.T) (*tcclient.Client, store.Store, *syncBuffer) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/hopper.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var key [32]byte
	_, err = rand.Read(key[:])
	require.NoError(t, err)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sec, err := server.NewSecurity(ctx, st, rootToken, key, queue.SystemClock{}, log)
	require.NoError(t, err)
	var handler http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	queueSrv, err := queueapi.New(queueapi.Options{Config: queueapi.Config{RootURL: hs.URL}, Store: st, Issuer: sec.Issuer, Logger: log})
	require.NoError(t, err)
	srv, err := api.New(api.Options{Authorizer: sec.Authorizer, Logger: log,
		Routes: append(queueSrv.Routes(), secretsapi.Routes(secretsapi.Deps{Store: st, Sealer: sec.Sealer, Caller: sec.Authorizer.Caller, Logger: log})...),
	})
	require.NoError(t, err)
	handler = srv.Handler()
	return &tcclient.Client{RootURL: hs.URL, MaxRetries: -1,
		Credentials: &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: rootToken}}, st, logs
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
