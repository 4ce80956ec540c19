package loginapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/loginapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

type bundle struct {
	srv   *loginapi.Server
	s     *apitest.Server
	p     *provider
	logs  *bytes.Buffer
	clock *offsetClock
}

// setup serves the login service with one generic OpenID provider, named
// "corp", whose groups claim gives corp-group:<g> roles.
func setup(t testing.TB, requireVerified bool) *bundle {
	t.Helper()
	p := newProvider(t, "hopper-client", "client-secret-value")
	logs := &bytes.Buffer{}
	cfg, err := login.ParseConfig([]byte(`{"providers": [{"name": "corp", "kind": "oidc", "issuer": "`+p.srv.URL+`",
		"clientId": "hopper-client", "clientSecretEnv": "CORP_SECRET", "scopes": ["profile", "email", "groups"],
		"requireVerifiedEmail": `+map[bool]string{true: "true", false: "false"}[requireVerified]+`}],
		"registeredClients": `+registrations+`}`),
		func(string) string { return "client-secret-value" })
	require.NoError(t, err)
	var srv *loginapi.Server
	clk := &offsetClock{}
	s := apitest.Start(t, apitest.Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(&syncWriter{b: logs}, nil)),
		Routes: func(s *apitest.Server) []api.Route {
			srv, err = loginapi.New(loginapi.Options{Store: s.Store, Sealer: s.Security.Sealer, Config: cfg, RootURL: s.URL, Clock: s.Clock, Logger: s.Logger,
				Issue: func(clientID string, scopes []string, start, expiry time.Time) (auth.Credentials, error) {
					return auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{ClientID: clientID, Start: start, Expiry: expiry,
						Scopes: scopes, Issuer: auth.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}})
				}, Expand: expander(s)})
			require.NoError(t, err)
			return append(s.AuthRoutes(), loginapi.Routes(loginapi.Deps{Server: srv})...)
		}})
	p.redirect = s.URL + "/login/corp/callback"
	return &bundle{s: s, p: p, logs: logs, clock: clk, srv: srv}
}

type syncWriter struct{ b *bytes.Buffer }

func (w *syncWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// signIn runs the browser's side of a sign-in and returns the callback's
// status and body, and the browser.
func (b *bundle) signIn(t testing.TB) (int, string, *http.Client) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.Path, "/ui/") {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(b.s.URL + "/login/corp")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), c
}

func (b *bundle) credentials(t testing.TB, c *http.Client) (int, []byte) {
	t.Helper()
	resp, err := c.Post(b.s.URL+"/login/credentials", "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func TestSignInThroughOpenIDProvider(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	status, _, c := b.signIn(t)
	require.Equal(t, http.StatusFound, status)
	status, body := b.credentials(t, c)
	require.Equal(t, http.StatusOK, status, string(body))
	var got struct {
		Identity    string
		Roles       []string
		Credentials tcclient.Credentials
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "corp/u-42|Ann!20Example", got.Identity)
	require.Equal(t, []string{"corp-group:admins", "corp-group:dev team"}, got.Roles)
	scopes, err := (&tcclient.Client{RootURL: b.s.URL, Credentials: &got.Credentials}).CurrentScopes(t.Context())
	require.NoError(t, err)
	require.Contains(t, scopes, "assume:login-identity:corp/u-42|Ann!20Example")
	require.Contains(t, scopes, "assume:corp-group:dev team")
	require.NotContains(t, b.logs.String(), "client-secret-value")
	require.NotContains(t, b.logs.String(), got.Credentials.AccessToken)
}

// TestSignInRefusals: each bad answer of a provider, or a provider that is
// down, is a page saying why, and no session.
func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		verified bool
		spoil    func(map[string]any) bool
		deny     bool
		down     bool
		status   int
		says     string
	}{
		{name: "token of another issuer", spoil: func(c map[string]any) bool { c["iss"] = "https://elsewhere.example"; return false },
			status: http.StatusBadRequest, says: "issued by another provider"},
		{name: "token for another audience", spoil: func(c map[string]any) bool { c["aud"] = "someone-else"; return false },
			status: http.StatusBadRequest, says: "issued to another client"},
		{name: "bad signature", spoil: func(map[string]any) bool { return true },
			status: http.StatusBadRequest, says: "signature does not verify"},
		{name: "expired token", spoil: func(c map[string]any) bool { c["exp"] = time.Now().Add(-time.Hour).Unix(); return false },
			status: http.StatusBadRequest, says: "it expired"},
		{name: "another sign-in's nonce", spoil: func(c map[string]any) bool { c["nonce"] = "other"; return false },
			status: http.StatusBadRequest, says: "nonce"},
		{name: "unverified e-mail where required", verified: true, spoil: func(c map[string]any) bool { c["email_verified"] = false; return false },
			status: http.StatusForbidden, says: "verified e-mail"},
		{name: "the person declined", deny: true, status: http.StatusForbidden, says: "access_denied"},
		{name: "provider down", down: true, status: http.StatusBadGateway, says: "cannot be reached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.verified)
			b.p.spoil, b.p.deny = tc.spoil, tc.deny
			if tc.down {
				b.p.srv.Close()
			}
			status, page, c := b.signIn(t)
			require.Equal(t, tc.status, status, page)
			require.Contains(t, page, tc.says)
			status, _ = b.credentials(t, c)
			require.Equal(t, http.StatusUnauthorized, status, "nothing granted")
		})
	}
}

// TestReturnToStaysOnSite: returnTo only names a path of hopper's own.
func TestReturnToStaysOnSite(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	for returnTo, want := range map[string]string{"/ui/tasks": "/ui/tasks", "//evil.example/x": "/ui/", "https://evil.example/": "/ui/", "/\\evil.example": "/ui/"} {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != b.p.srv.Listener.Addr().String() && !strings.HasPrefix(req.URL.Path, "/login/") {
				return http.ErrUseLastResponse
			}
			return nil
		}}
		resp, err := c.Get(b.s.URL + "/login/corp?returnTo=" + url.QueryEscape(returnTo))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.Header.Get("Location"), returnTo)
	}
}
