package purgecacheapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/purgecacheapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestPurgeCacheRoutes: a purge request is stored for its pool and cache
// with the scope naming both, listed for its pool (since a time) and in
// the list of all (a pool's requests are anyone's to read, through the
// anonymous role, as workers poll them); a malformed pool id, a missing
// cache name and a caller without the scope are refused with
// Taskcluster's errors.
func TestPurgeCacheRoutes(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Now().UTC().Truncate(time.Millisecond)) // signatures need the real time
	s := apitest.Start(t, apitest.Options{Clock: clock, Routes: func(s *apitest.Server) []api.Route {
		return purgecacheapi.Routes(purgecacheapi.Deps{Store: s.Store, Clock: clock, Version: "test"})
	}})
	root := &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}
	const base = purgecacheapi.BasePath
	pool := tcclient.EscapePathParam("prov/wt")
	cases := []struct {
		name   string
		scopes []string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"purge", []string{"purge-cache:prov/wt:cache-a"}, http.MethodPost, base + "/purge-cache/" + pool, map[string]string{"cacheName": "cache-a"}, http.StatusNoContent, ""},
		{"another cache needs its scope", []string{"purge-cache:prov/wt:cache-a"}, http.MethodPost, base + "/purge-cache/" + pool, map[string]string{"cacheName": "cache-b"}, http.StatusForbidden, "InsufficientScopes"},
		{"no cache name", nil, http.MethodPost, base + "/purge-cache/" + pool, map[string]string{}, http.StatusBadRequest, "InputValidationError"},
		{"malformed pool", nil, http.MethodPost, base + "/purge-cache/" + tcclient.EscapePathParam("no-slash"), map[string]string{"cacheName": "c"}, http.StatusBadRequest, "InvalidRequestArguments"},
		{"all requests need their scope", []string{"purge-cache:prov/wt:cache-a"}, http.MethodGet, base + "/purge-cache/list", nil, http.StatusForbidden, "InsufficientScopes"},
		{"bad since", nil, http.MethodGet, base + "/purge-cache/" + pool + "?since=yesterday", nil, http.StatusBadRequest, "InvalidRequestArguments"},
	}
	for _, c := range cases {
		status, body := s.Call(t, root, c.scopes, c.method, c.path, c.body)
		require.Equal(t, c.status, status, "%s: %s", c.name, body)
		if c.code != "" {
			var e struct{ Code string }
			require.NoError(t, json.Unmarshal(body, &e), c.name)
			require.Equal(t, c.code, e.Code, c.name)
		}
	}

	// Listed for its pool, with the time it was made, and in all requests.
	ctx := context.Background()
	reqs, err := s.Root.PurgeRequests(ctx, "prov/wt", time.Time{})
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, "cache-a", reqs[0].CacheName)
	require.True(t, clock.Now().Equal(reqs[0].Before.Time), reqs[0].Before.String())
	reqs, err = s.Root.PurgeRequests(ctx, "prov/wt", clock.Now().Add(time.Second))
	require.NoError(t, err)
	require.Empty(t, reqs, "made before since")
	anonymous := s.Client("", "")
	reqs, err = anonymous.PurgeRequests(ctx, "prov/other", time.Time{})
	require.NoError(t, err)
	require.Empty(t, reqs)
	status, body := s.Call(t, root, nil, http.MethodGet, base+"/purge-cache/list", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var all struct {
		Requests []map[string]string `json:"requests"`
	}
	require.NoError(t, json.Unmarshal(body, &all))
	require.Len(t, all.Requests, 1)
	require.Equal(t, map[string]string{"provisionerId": "prov", "workerType": "wt", "cacheName": "cache-a", "before": clock.Now().Format(tcclient.TimeLayout)}, all.Requests[0])
}
