package authapi_test

import (
	"bytes"
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

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// rootToken is the root client's access token in these tests.
const rootToken = apitest.RootToken

// bundle is one API server (queue plus auth routes) over a fresh SQLite
// store with production security, served by httptest.
type bundle struct {
	api *apitest.Server
	url string
	// clock is the wall clock plus an offset the test moves. Requests
	// signed by tcclient use the wall clock, so they stay valid while the
	// offset is under Hawk's 15-minute skew; requests signed with signed()
	// follow the shifted time.
	clock  *testclock.Shifted
	store  store.Store
	sealer *auth.Sealer
	logs   *e2e.SyncBuffer
	// root calls the API as the static root client.
	root *tcclient.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	clock := &testclock.Shifted{}
	logs := &e2e.SyncBuffer{}
	srv := apitest.Start(t, apitest.Options{Clock: clock,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Routes: (*apitest.Server).AuthRoutes})
	return &bundle{api: srv, url: srv.URL, clock: clock, store: srv.Store, sealer: srv.Security.Sealer, logs: logs, root: srv.Root}
}

// as returns a client of the bundle's server with the given credentials.
func (b *bundle) as(clientID, token string) *tcclient.Client {
	return b.api.Client(clientID, token)
}

// anonymous returns a client without credentials.
func (b *bundle) anonymous() *tcclient.Client { return b.api.Client("", "") }

// newClient has root create a client with scopes and returns it with its
// token.
func (b *bundle) newClient(t *testing.T, clientID string, scopes ...string) *tcclient.AuthClient {
	t.Helper()
	c, err := b.root.CreateClient(context.Background(), clientID, &tcclient.ClientRequest{
		Expires: tcclient.NewTime(time.Now().Add(time.Hour)), Description: "test client " + clientID, Scopes: scopes,
	})
	require.NoError(t, err)
	require.Len(t, c.AccessToken, 44)
	return c
}

// reply is a raw HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorCode decodes the Taskcluster error code of a reply.
func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	var body struct {
		Code string `json:"code"`
	}
	require.NoError(t, json.Unmarshal(r.body, &body), "%s", r.body)
	return body.Code
}

// signed sends a request signed with creds at the bundle's (shifted) time;
// nil creds send it unsigned. A non-nil body is sent as JSON.
func (b *bundle) signed(t *testing.T, creds *hawk.Credentials, method, path string, body any) reply {
	t.Helper()
	var rdr io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, b.url+path, rdr)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if creds != nil {
		header, err := hawk.RequestHeader(*creds, method, req.URL.String(), b.clock.Now(), "", "", "")
		require.NoError(t, err)
		req.Header.Set("Authorization", header)
	}
	return do(t, req)
}

// get sends an unsigned GET to a full URL (signed URLs carry their bewit).
func get(t *testing.T, rawURL string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, rawURL, nil)
	require.NoError(t, err)
	return do(t, req)
}

func do(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// requireAPIError asserts that err is an API error with the given status
// and code, and that the first line of its message contains msg.
func requireAPIError(t *testing.T, err error, status int, code, msg string) {
	t.Helper()
	var apiErr *tcclient.APIError
	require.True(t, errors.As(err, &apiErr), "want an API error, got %v", err)
	require.Equal(t, status, apiErr.StatusCode, "%v", err)
	require.Equal(t, code, apiErr.Code, "%v", err)
	first, _, _ := strings.Cut(apiErr.Message, "\n\n---")
	require.Contains(t, first, msg)
}
