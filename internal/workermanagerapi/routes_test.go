package workermanagerapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workermanagerapi"
)

// rootIssuer signs workers' credentials with the root client, which the
// server knows.
type rootIssuer struct{}

func (rootIssuer) WorkerCredentials(clientID string, scopes []string, start, expiry time.Time) (auth.Credentials, error) {
	return auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{ClientID: clientID, Start: start, Expiry: expiry, Scopes: scopes,
		Issuer: auth.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}})
}

// TestWorkerManagerRoutes: a static pool is created (once: again is a
// conflict), read and listed; a static worker is declared with its
// secret, which no reply or error echoes; it registers with that secret
// (not another) and gets credentials the API takes, named after it;
// each call needs its scope.
func TestWorkerManagerRoutes(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		return workermanagerapi.Routes(workermanagerapi.Deps{Store: s.Store, Queue: s.Store, Issuer: rootIssuer{},
			Providers: []workermanagerapi.Provider{{ID: "static", Type: workermanager.ProviderTypeStatic}}, Logger: s.Logger, Version: "test"})
	}})
	root := &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}
	const base = workermanagerapi.BasePath
	call := func(creds *tcclient.Credentials, scopes []string, method, path string, body any) (int, string, map[string]any) {
		t.Helper()
		status, raw := s.Call(t, creds, scopes, method, base+path, body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return status, string(raw), out
	}
	pool := map[string]any{"providerId": "static", "description": "builders", "owner": "ops@example.com", "emailOnError": false,
		"config": map[string]any{"lifecycle": map[string]any{"reregistrationTimeout": 3600}, "workerConfig": map[string]any{"hopperWorker": map[string]any{"capacity": 2}}}}
	status, text, _ := call(root, []string{"worker-manager:manage-worker-pool:proj/linux"}, http.MethodPut, "/worker-pool/proj%2Flinux", pool)
	require.Equal(t, http.StatusForbidden, status, "the provider's scope too: %s", text)
	status, text, out := call(root, []string{"worker-manager:manage-worker-pool:proj/linux", "worker-manager:provider:static"}, http.MethodPut, "/worker-pool/proj%2Flinux", pool)
	require.Equal(t, http.StatusOK, status, text)
	require.Equal(t, "proj/linux", out["workerPoolId"])
	status, _, out = call(root, nil, http.MethodPut, "/worker-pool/proj%2Flinux", pool)
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, "RequestConflict", out["code"])
	status, text, out = call(root, []string{"worker-manager:get-worker-pool:proj/linux"}, http.MethodGet, "/worker-pool/proj%2Flinux", nil)
	require.Equal(t, http.StatusOK, status, text)
	require.Equal(t, "builders", out["description"])
	status, _, out = call(root, nil, http.MethodGet, "/worker-pool/proj%2Fnone", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "ResourceNotFound", out["code"])
	status, text, out = call(root, nil, http.MethodGet, "/providers", nil)
	require.Equal(t, http.StatusOK, status, text)
	require.Equal(t, []any{map[string]any{"providerId": "static", "providerType": "static"}}, out["providers"])

	// A static worker and its secret, never echoed.
	secret := strings.Repeat("s", 22) + strings.Repeat("t", 22)
	expires := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	worker := map[string]any{"expires": expires, "capacity": 1, "providerInfo": map[string]any{"staticSecret": secret}}
	status, text, _ = call(root, nil, http.MethodPut, "/workers/proj%2Flinux/rack-1/build-1", map[string]any{"expires": "soon", "providerInfo": map[string]any{"staticSecret": secret}})
	require.Equal(t, http.StatusBadRequest, status, text)
	require.NotContains(t, text, secret)
	status, text, _ = call(root, nil, http.MethodPut, "/workers/proj%2Flinux/rack-1/build-1", worker)
	require.Equal(t, http.StatusOK, status, text)
	require.NotContains(t, text, secret)

	register := func(proof string) (int, string, map[string]any) {
		return call(nil, nil, http.MethodPost, "/worker/register", map[string]any{"workerPoolId": "proj/linux", "providerId": "static",
			"workerGroup": "rack-1", "workerId": "build-1", "workerIdentityProof": map[string]any{"staticSecret": proof}})
	}
	status, text, _ = register(strings.Repeat("x", 44))
	require.GreaterOrEqual(t, status, 400, text)
	require.Less(t, status, 500, text)
	require.NotContains(t, text, strings.Repeat("x", 44))
	status, text, out = register(secret)
	require.Equal(t, http.StatusOK, status, text)
	creds := out["credentials"].(map[string]any)
	require.Equal(t, "worker/static/proj/linux/rack-1/build-1", creds["clientId"])
	require.Equal(t, map[string]any{"hopperWorker": map[string]any{"capacity": float64(2)}}, out["workerConfig"])
	worker1 := &tcclient.Credentials{ClientID: creds["clientId"].(string), AccessToken: creds["accessToken"].(string), Certificate: creds["certificate"].(string)}
	status, text, out = call(worker1, nil, http.MethodGet, "/workers/proj%2Flinux/rack-1/build-1/should-terminate", nil)
	require.Equal(t, http.StatusOK, status, text)
	require.Equal(t, false, out["terminate"])
	status, text, _ = call(worker1, nil, http.MethodGet, "/workers/proj%2Flinux/rack-1/build-2/should-terminate", nil)
	require.Equal(t, http.StatusForbidden, status, "another worker's: %s", text)
}
