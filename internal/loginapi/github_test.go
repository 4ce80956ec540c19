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
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/loginapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// ghBundle is hopper's login service with one github provider, "gh", on
// a local GitHub Enterprise Server that enforces GitHub's API description.
type ghBundle struct {
	s     *apitest.Server
	gh    *forgetest.Users
	srv   *loginapi.Server
	clock *testclock.Clock
	logs  *bytes.Buffer
}

const ghSecret = "gh-client-secret-value"

func setupGitHub(t testing.TB, driver string, requireVerified bool) *ghBundle {
	t.Helper()
	gh := forgetest.StartUsers(t, "Iv1.hopper", ghSecret)
	clock := testclock.New(time.Now().UTC().Truncate(time.Millisecond))
	gh.Now = clock.Now
	cfg, err := login.ParseConfig([]byte(`{"providers": [{"name": "gh", "kind": "github", "displayName": "GitHub Enterprise",
		"baseUrl": "`+gh.Server.URL+`", "clientId": "Iv1.hopper", "clientSecretEnv": "GH_SECRET",
		"requireVerifiedEmail": `+map[bool]string{true: "true", false: "false"}[requireVerified]+`}]}`),
		func(string) string { return ghSecret })
	require.NoError(t, err)
	st, _ := apitest.OpenStore(t, driver)
	logs := &bytes.Buffer{}
	b := &ghBundle{gh: gh, clock: clock, logs: logs}
	b.s = apitest.Start(t, apitest.Options{Store: st, Clock: clock, Logger: slog.New(slog.NewTextHandler(&syncWriter{b: logs}, nil)),
		Routes: func(s *apitest.Server) []api.Route {
			b.srv, err = loginapi.New(loginapi.Options{Store: s.Store, Sealer: s.Security.Sealer, Config: cfg, RootURL: s.URL, Clock: s.Clock, Logger: s.Logger,
				Issue: func(clientID string, scopes []string, start, expiry time.Time) (auth.Credentials, error) {
					return auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{ClientID: clientID, Start: start, Expiry: expiry,
						Scopes: scopes, Issuer: auth.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}})
				}})
			require.NoError(t, err)
			return append(s.AuthRoutes(), loginapi.Routes(loginapi.Deps{Server: b.srv})...)
		}})
	gh.Redirect = b.s.URL + "/login/gh/callback"
	gh.Put(forgetest.User{ID: 101, Login: "alice", Teams: []string{"acme/builders", "acme/ops"}, Admin: []string{"acme"},
		Member: []string{"other"}, Email: "alice@example.com", Verified: true})
	gh.Put(forgetest.User{ID: 202, Login: "bob", Teams: []string{"acme/builders"}, Email: "bob@example.com"})
	return b
}

// browser runs a browser's side of a sign-in up to hopper's callback
// (not following it) and returns the callback's URL.
func (b *ghBundle) toCallback(t testing.TB, who string) (*http.Client, string) {
	t.Helper()
	b.gh.SignInAs(who)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasSuffix(req.URL.Path, "/callback") {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(b.s.URL + "/login/gh?returnTo=/ui/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	return c, resp.Header.Get("Location")
}

// finish follows the callback; it answers the status, the body and the
// Referrer-Policy.
func finish(t testing.TB, c *http.Client, callback string) (int, string, string) {
	t.Helper()
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(callback)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get("Referrer-Policy")
}

func (b *ghBundle) signIn(t testing.TB, who string) *http.Client {
	t.Helper()
	c, cb := b.toCallback(t, who)
	status, page, _ := finish(t, c, cb)
	require.Equal(t, http.StatusFound, status, page)
	return c
}

type credsReply struct {
	Identity    string
	Roles       []string
	Credentials tcclient.Credentials
}

func (b *ghBundle) credentials(t testing.TB, c *http.Client) (int, credsReply) {
	t.Helper()
	resp, err := c.Post(b.s.URL+"/login/credentials", "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var got credsReply
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	}
	return resp.StatusCode, got
}

// TestSignInThroughGitHub: a person signs in through GitHub Enterprise
// (its web flow and REST API under /api/v3) and gets Taskcluster's
// github strategy's identity and roles: their teams and the organizations
// they administer, not those they merely belong to.
func TestSignInThroughGitHub(t *testing.T) {
	t.Parallel()
	b := setupGitHub(t, "sqlite", true)
	c := b.signIn(t, "alice")
	status, got := b.credentials(t, c)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "gh/101|alice", got.Identity)
	require.Equal(t, []string{"gh-org-admin:acme", "gh-team:acme/builders", "gh-team:acme/ops"}, got.Roles)
	scopes, err := (&tcclient.Client{RootURL: b.s.URL, Credentials: &got.Credentials}).CurrentScopes(t.Context())
	require.NoError(t, err)
	require.Contains(t, scopes, "assume:login-identity:gh/101|alice")
	require.Contains(t, scopes, "assume:gh-team:acme/ops")
	for _, op := range []string{"/user", "/user/teams", "/user/memberships/orgs", "/user/emails"} {
		require.Equal(t, 1, b.gh.Calls(op), op)
	}
	require.NotContains(t, b.logs.String(), ghSecret)
	require.NotContains(t, b.logs.String(), "gho_", "GitHub's token is never logged")
	require.NotContains(t, b.logs.String(), got.Credentials.AccessToken)
	id, err := b.s.Store.GetLoginIdentity(t.Context(), "gh/101|alice")
	require.NoError(t, err)
	require.NotContains(t, id.Grant, "gho_", "the token is kept sealed")
}

// TestGitHubSignInRefusals: a wrong state, a replayed or expired code, a
// declined authorization, an unverified e-mail where one is required and
// a GitHub that is down are each a page saying why, sent without a
// Referer, and nothing is granted.
func TestGitHubSignInRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		who    string
		spoil  func(b *ghBundle, callback string) string
		status int
		says   string
	}{
		{name: "wrong state", who: "alice", status: http.StatusBadRequest, says: "unknown, expired or already used",
			spoil: func(b *ghBundle, cb string) string { return withQuery(cb, "state", "forged") }},
		{name: "replayed callback", who: "alice", status: http.StatusBadRequest, says: "unknown, expired or already used"},
		{name: "expired code", who: "alice", status: http.StatusBadRequest, says: "did not accept",
			spoil: func(b *ghBundle, cb string) string {
				b.gh.Now = func() time.Time { return time.Now().Add(11 * time.Minute) }
				return cb
			}},
		{name: "declined", who: "nobody", status: http.StatusForbidden, says: "access_denied"},
		{name: "unverified e-mail", who: "bob", status: http.StatusForbidden, says: "verified e-mail"},
		{name: "GitHub down", who: "alice", status: http.StatusBadGateway, says: "cannot be reached",
			spoil: func(b *ghBundle, cb string) string { b.gh.SetDown(true); return cb }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupGitHub(t, "sqlite", true)
			c, cb := b.toCallback(t, tc.who)
			if tc.name == "replayed callback" {
				// The callback is followed once, then again.
				status, _, _ := finish(t, c, cb)
				require.Equal(t, http.StatusFound, status)
				jar, _ := cookiejar.New(nil)
				c = &http.Client{Jar: jar}
			} else if tc.spoil != nil {
				cb = tc.spoil(b, cb)
			}
			status, page, referrer := finish(t, c, cb)
			require.Equal(t, tc.status, status, page)
			require.Contains(t, page, tc.says)
			require.Equal(t, "no-referrer", referrer)
			status, _ = b.credentials(t, c)
			require.Equal(t, http.StatusUnauthorized, status, "nothing granted")
			u, _ := url.Parse(cb)
			for _, secret := range []string{u.Query().Get("code"), u.Query().Get("state"), ghSecret} {
				if secret != "" && secret != "forged" {
					require.NotContains(t, b.logs.String(), secret)
				}
			}
		})
	}
}

// TestGitHubCodeReplayedWithFreshState: a code GitHub already traded is
// refused even behind a fresh state.
func TestGitHubCodeReplayedWithFreshState(t *testing.T) {
	t.Parallel()
	b := setupGitHub(t, "sqlite", false)
	c, cb := b.toCallback(t, "alice")
	status, _, _ := finish(t, c, cb)
	require.Equal(t, http.StatusFound, status)
	c2, cb2 := b.toCallback(t, "alice")
	old, _ := url.Parse(cb)
	status, page, _ := finish(t, c2, withQuery(cb2, "code", old.Query().Get("code")))
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, page, "did not accept")
	status, _ = b.credentials(t, c2)
	require.Equal(t, http.StatusUnauthorized, status)
}

func withQuery(raw, key, value string) string {
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestGitHubConfig(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "s" }
	c, err := login.ParseConfig([]byte(`{"providers": [{"name": "github", "kind": "github", "clientId": "a", "clientSecretEnv": "X"},
		{"name": "ghe", "kind": "github", "baseUrl": "https://ghe.example.com/", "clientId": "b", "clientSecretEnv": "X", "requireVerifiedEmail": true}]}`), getenv)
	require.NoError(t, err)
	gh, _ := c.Provider("github")
	require.Equal(t, "https://github.com", gh.BaseURL)
	require.Equal(t, "https://api.github.com", gh.APIURL)
	require.Equal(t, []string{"read:org"}, gh.Scopes)
	ghe, _ := c.Provider("ghe")
	require.Equal(t, "https://ghe.example.com/api/v3", ghe.APIURL)
	require.Equal(t, []string{"read:org", "user:email"}, ghe.Scopes)
	for name, bad := range map[string]string{
		"issuer":      `{"providers": [{"name": "g", "kind": "github", "issuer": "https://github.com", "clientId": "a"}]}`,
		"bad base":    `{"providers": [{"name": "g", "kind": "github", "baseUrl": "ftp://x", "clientId": "a"}]}`,
		"groupsClaim": `{"providers": [{"name": "g", "kind": "github", "groupsClaim": "groups", "clientId": "a"}]}`,
		"oidc base":   `{"providers": [{"name": "g", "kind": "oidc", "issuer": "https://x", "baseUrl": "https://x", "clientId": "a"}]}`,
	} {
		_, err := login.ParseConfig([]byte(bad), getenv)
		require.Error(t, err, name)
	}
	require.Equal(t, []string{"github-org-admin:acme", "github-team:acme/ci"},
		gh.Roles(login.Person{Subject: "1", Groups: []string{"acme:ci", "acme"}}), "Taskcluster's names for a provider named github")
}

var _ = store.ErrNotFound
