package loginapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/loginapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// registrations are the websites of setup's configuration: treeherder
// asks for consent; tools is whitelisted.
const registrations = `[
	{"clientId": "treeherder", "description": "Treeherder retriggers", "redirectUri": ["http://localhost/th/callback"],
	 "scope": ["queue:rerun-task:*", "secrets:get:th/*"], "maxExpires": "1 day"},
	{"clientId": "tools", "redirectUri": ["http://localhost/tools/callback"], "scope": ["secrets:get:th/*"], "whitelisted": true}]`

const siteCallback = "http://localhost/th/callback"

// offsetClock is the system clock moved on by a test.
type offsetClock struct{ by atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.by.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.by.Add(int64(d)) }

func expander(s *apitest.Server) loginapi.ExpandFunc {
	return func(ctx context.Context, scopes []string) ([]string, error) {
		e, err := s.Security.Roles.Expander(ctx)
		if err != nil {
			return nil, err
		}
		return e.Expand(scopes), nil
	}
}

// site is a registered website's OAuth2 client (golang.org/x/oauth2).
func (b *bundle) site(clientID, callback string, scopes ...string) *oauth2.Config {
	return &oauth2.Config{ClientID: clientID, RedirectURL: callback, Scopes: scopes, Endpoint: oauth2.Endpoint{
		AuthURL: b.s.URL + "/login/oauth/authorize", TokenURL: b.s.URL + "/login/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
}

// visit has the browser c open to, stopping at the console or the site.
func visit(t testing.TB, c *http.Client, to string) (int, string, string) {
	t.Helper()
	stop := *c
	stop.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := stop.Get(to)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// consent is the console's consent page's request: the fragment's query,
// answered with allow.
func (b *bundle) consent(t testing.TB, c *http.Client, location string, allow bool, origin string) (int, string) {
	t.Helper()
	frag, ok := strings.CutPrefix(location, "/ui/#/third-party?")
	require.True(t, ok, location)
	q, err := url.ParseQuery(frag)
	require.NoError(t, err)
	body, _ := json.Marshal(map[string]any{"clientId": q.Get("client_id"), "redirectUri": q.Get("redirect_uri"),
		"scope": strings.Fields(q.Get("scope")), "state": q.Get("state"), "expires": q.Get("expires"),
		"codeChallenge": q.Get("code_challenge"), "codeChallengeMethod": q.Get("code_challenge_method"), "allow": allow})
	req, _ := http.NewRequest(http.MethodPost, b.s.URL+"/login/oauth/decision", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var got struct{ RedirectTo string }
	_ = json.Unmarshal(out, &got)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(out)
	}
	return resp.StatusCode, got.RedirectTo
}

func siteCredentials(t testing.TB, rootURL, bearer string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, rootURL+"/login/oauth/credentials", nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestThirdPartyFlow: a registered website gets credentials only after
// the person's consent, only within its registration's scopes and the
// person's, once per code, and only with the PKCE verifier it began with.
func TestThirdPartyFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := t.Context()
	// The person's group gives a role with one scope the site may have,
	// one narrower than the site's, and one the site may not have.
	_, err := b.s.Root.CreateRole(ctx, "corp-group:admins", &tcclient.RoleRequest{Description: "admins",
		Scopes: []string{"queue:rerun-task:*", "secrets:get:th/one", "secrets:get:other/*"}})
	require.NoError(t, err)
	_, _, c := b.signIn(t)

	site := b.site("treeherder", siteCallback, "queue:rerun-task:*", "secrets:get:th/*")
	verifier := oauth2.GenerateVerifier()
	status, location, _ := visit(t, c, site.AuthCodeURL("site-state", oauth2.S256ChallengeOption(verifier)))
	require.Equal(t, http.StatusFound, status)
	require.Contains(t, location, "description=Treeherder+retriggers")

	status, body := b.consent(t, c, location, true, "http://evil.example")
	require.Equal(t, http.StatusForbidden, status, "another origin cannot consent: %s", body)
	status, to := b.consent(t, c, location, true, b.s.URL)
	require.Equal(t, http.StatusOK, status, to)
	back, err := url.Parse(to)
	require.NoError(t, err)
	require.Equal(t, siteCallback, back.Scheme+"://"+back.Host+back.Path)
	require.Equal(t, "site-state", back.Query().Get("state"))
	code := back.Query().Get("code")

	_, err = site.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
	require.ErrorContains(t, err, "invalid_grant", "another verifier")
	_, err = site.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	require.ErrorContains(t, err, "invalid_grant", "the failed exchange used the code up")

	_, location, _ = visit(t, c, site.AuthCodeURL("s2", oauth2.S256ChallengeOption(verifier)))
	_, to = b.consent(t, c, location, true, b.s.URL)
	back, _ = url.Parse(to)
	tok, err := site.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	require.Equal(t, "Bearer", tok.TokenType)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), tok.Expiry, time.Minute)
	_, err = site.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	require.ErrorContains(t, err, "invalid_grant", "a replayed code")

	status, creds := siteCredentials(t, b.s.URL, tok.AccessToken)
	require.Equal(t, http.StatusOK, status, string(creds))
	var got struct {
		Credentials tcclient.Credentials
		Scopes      []string
		Expires     time.Time
	}
	require.NoError(t, json.Unmarshal(creds, &got))
	require.Equal(t, "corp/u-42|Ann!20Example/treeherder", got.Credentials.ClientID)
	require.Equal(t, []string{"queue:rerun-task:*", "secrets:get:th/one"}, got.Scopes)
	scopes, err := (&tcclient.Client{RootURL: b.s.URL, Credentials: &got.Credentials}).CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "secrets:get:th/one")
	require.NotContains(t, scopes, "secrets:get:other/*", "wider than the registration")
	require.NotContains(t, scopes, "secrets:get:th/*", "wider than the person")

	status, _ = siteCredentials(t, b.s.URL, "not-a-token")
	require.Equal(t, http.StatusUnauthorized, status)
	for _, secret := range []string{tok.AccessToken, got.Credentials.AccessToken, code} {
		require.NotContains(t, b.logs.String(), secret)
	}

	// A code not traded within ten minutes is refused.
	_, location, _ = visit(t, c, site.AuthCodeURL("s3"))
	_, to = b.consent(t, c, location, true, b.s.URL)
	back, _ = url.Parse(to)
	b.clock.advance(11 * time.Minute)
	_, err = site.Exchange(ctx, back.Query().Get("code"))
	require.ErrorContains(t, err, "invalid_grant", "an expired code")
}

// TestThirdPartyRefusals: an unknown site or callback gets a page and
// never a redirect; a bad request goes back to the site with its error;
// a declined consent gives access_denied; nothing is granted without a
// signed-in person.
func TestThirdPartyRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	_, _, c := b.signIn(t)
	tests := []struct {
		name    string
		site    *oauth2.Config
		status  int
		page    string
		siteErr string
		opts    []oauth2.AuthCodeOption
	}{
		{name: "unknown site", site: b.site("nobody", siteCallback, "queue:rerun-task:*"), status: http.StatusBadRequest, page: "Unknown website"},
		{name: "unknown redirect URI", site: b.site("treeherder", "http://localhost/evil", "queue:rerun-task:*"),
			status: http.StatusBadRequest, page: "not registered"},
		{name: "redirect URI with a longer path", site: b.site("treeherder", siteCallback+"/x", "queue:rerun-task:*"),
			status: http.StatusBadRequest, page: "not registered"},
		{name: "scope beyond the registration", site: b.site("treeherder", siteCallback, "queue:rerun-task:*", "secrets:get:*"),
			status: http.StatusFound, siteErr: "invalid_scope"},
		{name: "no scope", site: b.site("treeherder", siteCallback), status: http.StatusFound, siteErr: "invalid_scope"},
		{name: "plain PKCE", site: b.site("treeherder", siteCallback, "queue:rerun-task:*"), status: http.StatusFound, siteErr: "invalid_request",
			opts: []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("code_challenge", "x"), oauth2.SetAuthURLParam("code_challenge_method", "plain")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, location, page := visit(t, c, tc.site.AuthCodeURL("st", tc.opts...))
			require.Equal(t, tc.status, status, page)
			if tc.page != "" {
				require.Contains(t, page, tc.page)
				require.Empty(t, location, "never sent anywhere")
				return
			}
			back, err := url.Parse(location)
			require.NoError(t, err)
			require.Equal(t, tc.siteErr, back.Query().Get("error"), location)
			require.Equal(t, "st", back.Query().Get("state"))
		})
	}
	t.Run("declined", func(t *testing.T) {
		_, location, _ := visit(t, c, b.site("treeherder", siteCallback, "queue:rerun-task:*").AuthCodeURL("st"))
		status, to := b.consent(t, c, location, false, b.s.URL)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, siteCallback+"?error=access_denied&state=st", to)
	})
	t.Run("not signed in", func(t *testing.T) {
		_, location, _ := visit(t, http.DefaultClient, b.site("treeherder", siteCallback, "queue:rerun-task:*").AuthCodeURL("st"))
		status, _ := b.consent(t, &http.Client{}, location, true, b.s.URL)
		require.Equal(t, http.StatusUnauthorized, status)
	})
	t.Run("whitelisted", func(t *testing.T) {
		tools := b.site("tools", "http://localhost/tools/callback", "secrets:get:th/*")
		status, location, _ := visit(t, c, tools.AuthCodeURL("st"))
		require.Equal(t, http.StatusFound, status)
		require.True(t, strings.HasPrefix(location, "http://localhost/tools/callback?code="), "no consent page: %s", location)
		_, location, _ = visit(t, http.DefaultClient, tools.AuthCodeURL("st"))
		require.True(t, strings.HasPrefix(location, "/ui/#/third-party?"), "signed out, the console signs in first: %s", location)
		narrower := b.site("tools", "http://localhost/tools/callback", "secrets:get:th/x")
		_, location, _ = visit(t, c, narrower.AuthCodeURL("st"))
		require.True(t, strings.HasPrefix(location, "/ui/#/third-party?"), "other scopes than registered need consent: %s", location)
	})
}

// TestTokenRefusals: the token endpoint refuses, with RFC 6749's error
// codes, a code traded by another website or for another callback, an
// unknown website, another grant type and a body that is not a form; a
// refused exchange uses the code up.
func TestTokenRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	_, _, c := b.signIn(t)
	site := b.site("treeherder", siteCallback, "queue:rerun-task:*")
	code := func() string {
		_, location, _ := visit(t, c, site.AuthCodeURL("st"))
		_, to := b.consent(t, c, location, true, b.s.URL)
		back, err := url.Parse(to)
		require.NoError(t, err)
		return back.Query().Get("code")
	}
	post := func(contentType, body string) (int, string) {
		resp, err := http.Post(b.s.URL+"/login/oauth/token", contentType, strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	form := func(v url.Values) (int, string) { return post("application/x-www-form-urlencoded", v.Encode()) }
	tests := []struct {
		name   string
		send   func(code string) (int, string)
		status int
		says   string
	}{
		{"another website", func(code string) (int, string) {
			return form(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {"tools"}, "redirect_uri": {siteCallback}})
		}, http.StatusBadRequest, "invalid_grant"},
		{"another callback", func(code string) (int, string) {
			return form(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {"treeherder"}, "redirect_uri": {siteCallback + "x"}})
		}, http.StatusBadRequest, "invalid_grant"},
		{"unknown website", func(code string) (int, string) {
			return form(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {"nobody"}, "redirect_uri": {siteCallback}})
		}, http.StatusUnauthorized, "invalid_client"},
		{"another grant type", func(code string) (int, string) {
			return form(url.Values{"grant_type": {"password"}, "code": {code}, "client_id": {"treeherder"}})
		}, http.StatusBadRequest, "unsupported_grant_type"},
		{"a JSON body", func(code string) (int, string) {
			return post("application/json", `{"grant_type": "authorization_code", "code": "`+code+`"}`)
		}, http.StatusBadRequest, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := tc.send(code())
			require.Equal(t, tc.status, status, body)
			require.Contains(t, body, `"error":"`+tc.says+`"`)
			require.NotContains(t, body, "access_token")
		})
	}
	// A code refused for another callback cannot be traded afterwards.
	c1 := code()
	status, _ := form(url.Values{"grant_type": {"authorization_code"}, "code": {c1}, "client_id": {"treeherder"}, "redirect_uri": {siteCallback + "x"}})
	require.Equal(t, http.StatusBadRequest, status)
	_, err := site.Exchange(t.Context(), c1)
	require.ErrorContains(t, err, "invalid_grant")
}
