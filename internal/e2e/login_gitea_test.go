package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// browser is a person's browser without JavaScript: a cookie jar, and
// redirects followed by hand so the test sees each hop.
type browser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, c: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, to string, form url.Values, header ...string) (int, http.Header, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, to, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, resp.Header, string(data)
}

var hiddenInput = regexp.MustCompile(`<input[^>]*type="hidden"[^>]*>`)
var inputAttr = regexp.MustCompile(`(name|value)="([^"]*)"`)

// hiddenFields reads a page's hidden form fields (Gitea's _csrf, and the
// grant form's client_id, state, nonce, ...).
func hiddenFields(page string) url.Values {
	out := url.Values{}
	for _, in := range hiddenInput.FindAllString(page, -1) {
		var name, value string
		for _, m := range inputAttr.FindAllStringSubmatch(in, -1) {
			if m[1] == "name" {
				name = html.UnescapeString(m[2])
			} else {
				value = html.UnescapeString(m[2])
			}
		}
		if name != "" {
			out.Set(name, value)
		}
	}
	return out
}

// giteaSignIn signs user in to Gitea's own web UI.
func (b *browser) giteaSignIn(g *gitea, user, password string) {
	b.t.Helper()
	status, _, page := b.do(http.MethodGet, g.url+"/user/login", nil)
	require.Equal(b.t, http.StatusOK, status)
	form := hiddenFields(page)
	form.Set("user_name", user)
	form.Set("password", password)
	status, _, page = b.do(http.MethodPost, g.url+"/user/login", form)
	require.Equal(b.t, http.StatusSeeOther, status, page)
}

// hopperSignIn goes through hopper's sign-in with provider as a person
// signed in to Gitea, granting hopper access the first time, and returns
// the callback URL Gitea sent the browser to.
func (b *browser) toCallback(g *gitea, rootURL, provider string) string {
	b.t.Helper()
	status, h, _ := b.do(http.MethodGet, rootURL+"/login/"+provider+"?returnTo=/ui/tasks", nil)
	require.Equal(b.t, http.StatusFound, status)
	require.Equal(b.t, "no-referrer", h.Get("Referrer-Policy"))
	authorize := h.Get("Location")
	require.True(b.t, strings.HasPrefix(authorize, g.url+"/login/oauth/authorize?"), authorize)
	q, err := url.ParseQuery(strings.SplitN(authorize, "?", 2)[1])
	require.NoError(b.t, err)
	require.Equal(b.t, "S256", q.Get("code_challenge_method"))
	require.NotEmpty(b.t, q.Get("nonce"))
	status, h, page := b.do(http.MethodGet, authorize, nil)
	if status == http.StatusOK { // the consent page, the first time
		form := hiddenFields(page)
		form.Set("granted", "true")
		status, h, page = b.do(http.MethodPost, g.url+"/login/oauth/grant", form)
	}
	require.Contains(b.t, []int{http.StatusFound, http.StatusSeeOther}, status, page)
	return h.Get("Location")
}

// TestLoginThroughGitea signs a person in to hopper through a real Gitea
// as OpenID provider: their Gitea organization and team give the roles
// of their credentials, which the console receives in a POST body (never
// a URL), expire, and are refused where the team's role grants nothing;
// a replayed callback and a forged state are refused and grant nothing.
func TestLoginThroughGitea(t *testing.T) {
	t.Parallel()
	g := startGitea(t)
	g.api(t, http.MethodPost, "/admin/users", map[string]any{"username": "bob", "email": "bob@example.com", "password": "bob-password-1",
		"must_change_password": false}, nil)
	g.api(t, http.MethodPost, "/orgs", map[string]any{"username": "acme"}, nil)
	var team struct{ ID int64 }
	g.api(t, http.MethodPost, "/orgs/acme/teams", map[string]any{"name": "builders", "permission": "read", "units": []string{"repo.code"}}, &team)
	g.api(t, http.MethodPut, fmt.Sprintf("/teams/%d/members/bob", team.ID), nil, nil)

	listen := e2e.FreePort(t)
	rootURL := "http://" + listen
	// The guide's steps: register hopper with Gitea, configure the
	// providers, give the team its scopes.
	out, err := e2e.DocShell{Env: []string{"GITEA_TOKEN=" + g.token}, Replace: []string{
		"https://gitea.example.com", g.url, "https://hopper.example.com", rootURL}}.Run(t, e2e.DocExample(t, "login-gitea-app"))
	require.NoError(t, err, out)
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &app), out)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "gitea-client-secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(app.ClientSecret+"\n"), 0o600))
	config := filepath.Join(dir, "login.json")
	require.NoError(t, os.WriteFile(config, []byte(e2e.DocExample(t, "login-config").Replace(t,
		"https://gitea.example.com", g.url, `"3f1c…"`, `"`+app.ClientID+`"`, "/etc/hopper/gitea-client-secret", secretFile)), 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + config,
		"HOPPER_CORP_CLIENT_SECRET=corp-secret-not-used-here"}})
	out, err = e2e.DocShell{Env: srv.Env()}.Run(t, e2e.DocExample(t, "login-team-role"))
	require.NoError(t, err, out)
	ctx := context.Background()

	// The providers the console offers.
	b := newBrowser(t)
	status, _, body := b.do(http.MethodGet, srv.RootURL+"/login/providers", nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"providers": [{"name": "gitea", "kind": "gitea", "displayName": "Gitea", "signInUrl": "/login/gitea"},
		{"name": "corp", "kind": "oidc", "displayName": "Corporate SSO", "signInUrl": "/login/corp"}]}`, body)

	// Not signed in: no credentials.
	status, _, _ = b.do(http.MethodPost, srv.RootURL+"/login/credentials", nil)
	require.Equal(t, http.StatusUnauthorized, status)

	b.giteaSignIn(g, "bob", "bob-password-1")
	callback := b.toCallback(g, srv.RootURL, "gitea")
	require.True(t, strings.HasPrefix(callback, srv.RootURL+"/login/gitea/callback?"), callback)
	status, h, _ := b.do(http.MethodGet, callback, nil)
	require.Equal(t, http.StatusFound, status)
	require.Equal(t, "/ui/tasks", h.Get("Location"))
	require.NotContains(t, h.Get("Location"), "code")

	// A second visit of the callback (a replayed code) grants nothing.
	replay := newBrowser(t)
	status, _, page := replay.do(http.MethodGet, callback, nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, page, "unknown, expired or already used")
	status, _, _ = replay.do(http.MethodPost, srv.RootURL+"/login/credentials", nil)
	require.Equal(t, http.StatusUnauthorized, status)
	// A forged state grants nothing either.
	u, _ := url.Parse(callback)
	q := u.Query()
	q.Set("state", "forged-state")
	u.RawQuery = q.Encode()
	status, _, page = replay.do(http.MethodGet, u.String(), nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, page, "Sign-in refused")

	// The console takes credentials with a POST from its own origin; another
	// origin gets none.
	status, _, _ = b.do(http.MethodPost, srv.RootURL+"/login/credentials", nil, "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, status)
	status, _, body = b.do(http.MethodPost, srv.RootURL+"/login/credentials", nil, "Origin", srv.RootURL)
	require.Equal(t, http.StatusOK, status, body)
	var got struct {
		Identity    string
		Roles       []string
		Scopes      []string
		Expires     time.Time
		Credentials tcclient.Credentials
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	// The reply has the guide's shape.
	var guide, reply map[string]any
	require.NoError(t, json.Unmarshal([]byte(e2e.DocExample(t, "login-credentials-reply").Text), &guide))
	require.NoError(t, json.Unmarshal([]byte(body), &reply))
	for k := range guide {
		require.Contains(t, reply, k)
	}
	require.Len(t, reply, len(guide))
	require.Regexp(t, `^gitea/[0-9]+\|bob$`, got.Identity)
	require.Equal(t, []string{"gitea-org:acme", "gitea-team:acme/builders"}, got.Roles)
	require.Equal(t, got.Identity, got.Credentials.ClientID)
	require.NotEmpty(t, got.Credentials.Certificate)
	require.WithinDuration(t, time.Now().Add(time.Hour), got.Expires, 2*time.Minute)

	person := &tcclient.Client{RootURL: srv.RootURL, Credentials: &got.Credentials}
	scopes, err := person.CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "assume:login-identity:"+got.Identity)
	require.Contains(t, scopes, "assume:gitea-team:acme/builders")
	require.Contains(t, scopes, "secrets:get:acme/*", "the team's role gives its scopes")
	require.NotContains(t, scopes, "secrets:get:other/*")

	// Signing out ends the session.
	status, _, _ = b.do(http.MethodPost, srv.RootURL+"/login/logout", nil, "Origin", srv.RootURL)
	require.Equal(t, http.StatusOK, status)
	status, _, _ = b.do(http.MethodPost, srv.RootURL+"/login/credentials", nil)
	require.Equal(t, http.StatusUnauthorized, status)

	// Nothing secret reached hopper's log: not the code, the state, the
	// client secret or the credentials.
	cq, _ := url.Parse(callback)
	logs := srv.Logs()
	for name, secret := range map[string]string{"code": cq.Query().Get("code"), "state": cq.Query().Get("state"),
		"client secret": app.ClientSecret, "access token": got.Credentials.AccessToken} {
		require.NotEmpty(t, secret, name)
		require.NotContains(t, logs, secret, "the log shows the %s", name)
	}
	require.Contains(t, logs, "signed in")
}
