package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// signinFixture is what web/browser/signin.mjs works on.
type signinFixture struct {
	RootURL   string   `json:"rootUrl"`
	Provider  string   `json:"provider"`
	User      string   `json:"user"`
	Password  string   `json:"password"`
	Identity  string   `json:"identity"`
	Roles     []string `json:"roles"`
	Scopes    []string `json:"scopes"`
	NotScopes []string `json:"notScopes,omitempty"`
	// AuthorizeURL is a registered website's request; the website's
	// callback page then says SiteSays.
	AuthorizeURL string `json:"authorizeUrl,omitempty"`
	SiteClientID string `json:"siteClientId,omitempty"`
	SiteSays     string `json:"siteSays,omitempty"`
	// WaitForExpiry has the browser wait, signed in, until the sign-in
	// expires.
	WaitForExpiry bool `json:"waitForExpiry,omitempty"`
}

// signinBrowser returns the system Chromium and the web directory with
// puppeteer-core, or skips.
func signinBrowser(t *testing.T) (chromium, webDir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary and a headless browser")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
		}
	}
	if chromium == "" {
		t.Skip("no Chromium installed (CI installs Debian's chromium: apt-get install chromium)")
	}
	webDir = filepath.Join(e2e.RepoRoot(), "web")
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "puppeteer-core")); err != nil {
		t.Skip("puppeteer-core not installed: run `npm ci --prefix web`")
	}
	return chromium, webDir
}

// runSigninBrowser runs web/browser/signin.mjs on fx.
func runSigninBrowser(ctx context.Context, t *testing.T, chromium, webDir string, fx signinFixture) {
	t.Helper()
	data, err := json.Marshal(fx)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "node", filepath.Join("browser", "signin.mjs"))
	cmd.Dir = webDir
	cmd.Env = append(os.Environ(), "HOPPER_SIGNIN_FIXTURE="+string(data), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Log(string(out))
	require.NoError(t, err, "browser test failed:\n%s", out)
	require.Contains(t, string(out), "PASS all")
}

// site is a registered website: a real OAuth2 client (golang.org/x/oauth2)
// whose callback trades the code and fetches credentials.
type site struct {
	srv      *httptest.Server
	conf     *oauth2.Config
	verifier string
	mu       sync.Mutex
	reply    []byte
	referer  string
}

func startSite(t *testing.T, rootURL, clientID string, scopes ...string) *site {
	s := &site{verifier: oauth2.GenerateVerifier()}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/login" {
			http.NotFound(w, r) // the browser's favicon.ico
			return
		}
		tok, err := s.conf.Exchange(r.Context(), r.URL.Query().Get("code"), oauth2.VerifierOption(s.verifier))
		if err != nil {
			http.Error(w, "exchange: "+err.Error(), http.StatusBadGateway)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, rootURL+"/login/oauth/credentials", nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		s.mu.Lock()
		s.reply, s.referer = body, r.Referer()
		s.mu.Unlock()
		fmt.Fprintf(w, "<!doctype html><p>%s got credentials (%d)</p>", clientID, resp.StatusCode)
	}))
	t.Cleanup(s.srv.Close)
	s.conf = &oauth2.Config{ClientID: clientID, RedirectURL: s.srv.URL + "/login", Scopes: scopes, Endpoint: oauth2.Endpoint{
		AuthURL: rootURL + "/login/oauth/authorize", TokenURL: rootURL + "/login/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	return s
}

// TestSignInThroughOpenIDProviderInBrowser: a person signs in to the
// console in Chromium through a real generic OpenID provider
// (oidc-provider), the console shows their identity, roles and expanded
// scopes (their group's role decides them), a registered website gets
// credentials after the person's consent and only within its scopes and
// the person's, and signing out ends it; no credential in a URL, a
// Referer or the log.
func TestSignInThroughOpenIDProviderInBrowser(t *testing.T) {
	t.Parallel()
	chromium, webDir := signinBrowser(t)
	listen := e2e.FreePort(t)
	rootURL := "http://" + listen
	issuer := startOIDC(t, strconv.Itoa(freeLoopbackPort(t)), rootURL, map[string][]string{"ann": {"builders"}}, 10*time.Minute).issuer
	th := startSite(t, rootURL, "treeherder", "queue:rerun-task:*", "secrets:get:treeherder/*")

	// The guide's registration, pointed at this provider and website.
	dir := t.TempDir()
	config := filepath.Join(dir, "login.json")
	require.NoError(t, os.WriteFile(config, []byte(e2e.DocExample(t, "login-registered-client").Replace(t,
		"https://sso.example.com/realms/corp", issuer, "https://treeherder.example.com/login", th.srv.URL+"/login")), 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + config,
		"HOPPER_CORP_CLIENT_SECRET=corp-client-secret"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := rootClient(srv).CreateRole(ctx, "corp-group:builders", &tcclient.RoleRequest{Description: "the builders group",
		Scopes: []string{"queue:rerun-task:builders/*", "secrets:get:treeherder/*", "secrets:get:other/*"}})
	require.NoError(t, err)

	runSigninBrowser(ctx, t, chromium, webDir, signinFixture{RootURL: srv.RootURL, Provider: "corp", User: "ann", Password: "any",
		Identity: "corp/ann|ann", Roles: []string{"corp-group:builders"},
		Scopes:       []string{"assume:login-identity:corp/ann|ann", "queue:rerun-task:builders/*", "secrets:get:other/*"},
		AuthorizeURL: th.conf.AuthCodeURL("th-state", oauth2.S256ChallengeOption(th.verifier)), SiteClientID: "treeherder",
		SiteSays: "treeherder got credentials (200)"})

	th.mu.Lock()
	reply, referer := th.reply, th.referer
	th.mu.Unlock()
	require.Empty(t, referer, "the console sends no Referer to the website")
	var got struct {
		Credentials tcclient.Credentials
		Scopes      []string
		Expires     time.Time
	}
	require.NoError(t, json.Unmarshal(reply, &got), string(reply))
	var guide, answer map[string]any
	require.NoError(t, json.Unmarshal([]byte(e2e.DocExample(t, "login-oauth-credentials-reply").Text), &guide))
	require.NoError(t, json.Unmarshal(reply, &answer))
	require.Equal(t, len(guide), len(answer))
	require.Equal(t, "corp/ann|ann/treeherder", got.Credentials.ClientID)
	require.Equal(t, []string{"queue:rerun-task:builders/*", "secrets:get:treeherder/*"}, got.Scopes, "the person's within the site's")
	require.WithinDuration(t, time.Now().Add(24*time.Hour), got.Expires, 5*time.Minute)
	scopes, err := (&tcclient.Client{RootURL: srv.RootURL, Credentials: &got.Credentials}).CurrentScopes(ctx)
	require.NoError(t, err, "hopper accepts the website's credentials")
	require.Contains(t, scopes, "secrets:get:treeherder/*")
	require.NotContains(t, scopes, "secrets:get:other/*")
	logs := srv.Logs()
	require.NotContains(t, logs, got.Credentials.AccessToken)
	require.NotContains(t, logs, "corp-client-secret")
	require.Contains(t, logs, "a website was granted credentials")
}

// TestSignInThroughGiteaInBrowser: people sign in to the console in
// Chromium through a real Gitea, and their Gitea team decides what they
// may do: bob, in acme's builders team, sees the team role's scopes on
// his profile; carol, in no team, signs in as herself without them.
func TestSignInThroughGiteaInBrowser(t *testing.T) {
	t.Parallel()
	chromium, webDir := signinBrowser(t)
	g := startGitea(t)
	var bob, carol struct{ ID int64 }
	g.api(t, http.MethodPost, "/admin/users", map[string]any{"username": "bob", "email": "bob@example.com", "password": "bob-password-1",
		"must_change_password": false}, &bob)
	g.api(t, http.MethodPost, "/admin/users", map[string]any{"username": "carol", "email": "carol@example.com", "password": "carol-password-1",
		"must_change_password": false}, &carol)
	g.api(t, http.MethodPost, "/orgs", map[string]any{"username": "acme"}, nil)
	var team struct{ ID int64 }
	g.api(t, http.MethodPost, "/orgs/acme/teams", map[string]any{"name": "builders", "permission": "read", "units": []string{"repo.code"}}, &team)
	g.api(t, http.MethodPut, fmt.Sprintf("/teams/%d/members/bob", team.ID), nil, nil)

	listen := e2e.FreePort(t)
	rootURL := "http://" + listen
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	g.api(t, http.MethodPost, "/user/applications/oauth2", map[string]any{"name": "hopper-console", "confidential_client": true,
		"redirect_uris": []string{rootURL + "/login/gitea/callback"}}, &app)
	dir := t.TempDir()
	config := filepath.Join(dir, "login.json")
	cfg, err := json.Marshal(map[string]any{"providers": []map[string]any{{"name": "gitea", "kind": "gitea", "displayName": "Gitea",
		"issuer": g.url, "clientId": app.ClientID, "clientSecretEnv": "HOPPER_GITEA_CLIENT_SECRET"}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(config, cfg, 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + config,
		"HOPPER_GITEA_CLIENT_SECRET=" + app.ClientSecret}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = rootClient(srv).CreateRole(ctx, "gitea-team:acme/builders", &tcclient.RoleRequest{Description: "Gitea team acme/builders",
		Scopes: []string{"secrets:get:acme/*", "queue:create-task:lowest:acme/*"}})
	require.NoError(t, err)

	runSigninBrowser(ctx, t, chromium, webDir, signinFixture{RootURL: srv.RootURL, Provider: "gitea", User: "bob", Password: "bob-password-1",
		Identity: fmt.Sprintf("gitea/%d|bob", bob.ID), Roles: []string{"gitea-org:acme", "gitea-team:acme/builders"},
		Scopes: []string{"secrets:get:acme/*", "queue:create-task:lowest:acme/*"}})
	runSigninBrowser(ctx, t, chromium, webDir, signinFixture{RootURL: srv.RootURL, Provider: "gitea", User: "carol", Password: "carol-password-1",
		Identity: fmt.Sprintf("gitea/%d|carol", carol.ID), Scopes: []string{fmt.Sprintf("assume:login-identity:gitea/%d|carol", carol.ID)},
		NotScopes: []string{"secrets:get:acme/*", "queue:create-task:lowest:acme/*"}})
	require.NotContains(t, srv.Logs(), app.ClientSecret)
}

// TestSignInExpiresInBrowser: when a person's sign-in ends (here after
// 40 seconds), the console says so and forgets their credentials, instead
// of failing its calls with them.
func TestSignInExpiresInBrowser(t *testing.T) {
	t.Parallel()
	chromium, webDir := signinBrowser(t)
	listen := e2e.FreePort(t)
	rootURL := "http://" + listen
	issuer := startOIDC(t, strconv.Itoa(freeLoopbackPort(t)), rootURL, map[string][]string{"dan": {"builders"}}, 10*time.Minute).issuer
	var cfg map[string]any
	require.NoError(t, json.Unmarshal([]byte(e2e.DocExample(t, "login-registered-client").Replace(t,
		"https://sso.example.com/realms/corp", issuer)), &cfg))
	cfg["sessionLifetime"] = "40s"
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	config := filepath.Join(t.TempDir(), "login.json")
	require.NoError(t, os.WriteFile(config, data, 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + config,
		"HOPPER_CORP_CLIENT_SECRET=corp-client-secret"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runSigninBrowser(ctx, t, chromium, webDir, signinFixture{RootURL: srv.RootURL, Provider: "corp", User: "dan", Password: "any",
		Identity: "corp/dan|dan", WaitForExpiry: true})
}
