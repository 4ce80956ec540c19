package loginapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cliFlow is a command's request: its loopback redirect, state and PKCE.
type cliFlow struct {
	redirect, state, verifier string
}

func newCLIFlow() cliFlow {
	return cliFlow{redirect: "http://127.0.0.1:4567/callback", state: "state-0123456789abcdef",
		verifier: "verifier-0123456789abcdefghijklmnopqrstuvwxyz-0123"}
}

func (f cliFlow) query() string {
	sum := sha256.Sum256([]byte(f.verifier))
	return url.Values{"redirect_uri": {f.redirect}, "state": {f.state}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"}}.Encode()
}

func do(t testing.TB, c *http.Client, method, to string, body any, header ...string) (int, http.Header, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, to, r)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

// allow runs the command's page and its Allow button, returning the code.
func (b *bundle) allow(t testing.TB, c *http.Client, f cliFlow) string {
	t.Helper()
	status, _, page := do(t, c, http.MethodGet, b.s.URL+"/login/corp/cli?"+f.query(), nil)
	require.Equal(t, http.StatusOK, status, page)
	require.Contains(t, page, "corp/u-42|Ann!20Example")
	require.NotContains(t, page, "no-referrer", "a browser would post the form with Origin: null")
	status, h, _ := do(t, c, http.MethodPost, b.s.URL+"/login/corp/cli/allow?"+f.query(), nil, "Origin", b.s.URL)
	require.Equal(t, http.StatusSeeOther, status)
	to, err := url.Parse(h.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, f.redirect, to.Scheme+"://"+to.Host+to.Path)
	require.Equal(t, f.state, to.Query().Get("state"))
	require.NotEmpty(t, to.Query().Get("code"))
	return to.Query().Get("code")
}

func (b *bundle) token(t testing.TB, code, verifier, redirect string) (int, string) {
	t.Helper()
	status, _, body := do(t, http.DefaultClient, http.MethodPost, b.s.URL+"/login/cli/token",
		map[string]string{"code": code, "codeVerifier": verifier, "redirectUri": redirect})
	return status, body
}

// TestCommandSignIn: a command's loopback sign-in gives the signed-in
// person's credentials once, for the verifier of its own challenge; every
// other request is refused and grants nothing.
func TestCommandSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	f := newCLIFlow()

	// Not signed in: the provider first, then back to the command's page.
	anon := &http.Client{}
	status, h, _ := do(t, anon, http.MethodGet, b.s.URL+"/login/corp/cli?"+f.query(), nil)
	require.Equal(t, http.StatusFound, status)
	require.Equal(t, "/login/corp?"+url.Values{"returnTo": {"/login/corp/cli?" + f.query()}}.Encode(), h.Get("Location"))
	status, _, _ = do(t, anon, http.MethodPost, b.s.URL+"/login/corp/cli/allow?"+f.query(), nil, "Origin", b.s.URL)
	require.Equal(t, http.StatusUnauthorized, status)

	status, _, c := b.signIn(t)
	require.Equal(t, http.StatusFound, status)

	// Requests that are refused before anything is sent to the redirect.
	bad := map[string]string{
		"another site":  strings.Replace(f.query(), url.QueryEscape(f.redirect), url.QueryEscape("https://evil.example/cb"), 1),
		"no port":       strings.Replace(f.query(), url.QueryEscape(f.redirect), url.QueryEscape("http://127.0.0.1/cb"), 1),
		"a query":       strings.Replace(f.query(), url.QueryEscape(f.redirect), url.QueryEscape(f.redirect+"?x=1"), 1),
		"plain PKCE":    strings.Replace(f.query(), "S256", "plain", 1),
		"no challenge":  url.Values{"redirect_uri": {f.redirect}, "state": {f.state}}.Encode(),
		"a short state": strings.Replace(f.query(), f.state, "s", 1),
	}
	for name, q := range bad {
		status, _, page := do(t, c, http.MethodGet, b.s.URL+"/login/corp/cli?"+q, nil)
		require.Equal(t, http.StatusBadRequest, status, name)
		require.Contains(t, page, "Command-line sign-in refused", name)
	}
	// Another site's form cannot allow a command.
	status, _, _ = do(t, c, http.MethodPost, b.s.URL+"/login/corp/cli/allow?"+f.query(), nil, "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, status)

	// Deny tells the command.
	status, h, _ = do(t, c, http.MethodPost, b.s.URL+"/login/corp/cli/deny?"+f.query(), nil, "Origin", b.s.URL)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, h.Get("Location"), "error=access_denied")
	require.NotContains(t, h.Get("Location"), "code=")

	// Allowed: the code with the right verifier gives the credentials, once.
	code := b.allow(t, c, f)
	status, body := b.token(t, code, f.verifier, f.redirect)
	require.Equal(t, http.StatusOK, status, body)
	var got struct {
		Identity    string
		Credentials map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, "corp/u-42|Ann!20Example", got.Identity)
	require.NotEmpty(t, got.Credentials["certificate"])
	status, body = b.token(t, code, f.verifier, f.redirect)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "unknown, expired or used already")
	require.NotContains(t, body, code, "the error reply does not echo the code")

	// Another verifier: refused, and the code is spent.
	code = b.allow(t, c, f)
	status, body = b.token(t, code, strings.Repeat("x", 43), f.redirect)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "PKCE")
	status, _ = b.token(t, code, f.verifier, f.redirect)
	require.Equal(t, http.StatusBadRequest, status)
	// Another redirect URI: refused.
	code = b.allow(t, c, f)
	status, _ = b.token(t, code, f.verifier, "http://127.0.0.1:9999/callback")
	require.Equal(t, http.StatusBadRequest, status)
	// A command's code is no provider's state.
	code = b.allow(t, c, f)
	status, _, page := do(t, anon, http.MethodGet, b.s.URL+"/login/corp/callback?code=x&state="+code, nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, page, "another provider")

	// Signed out: a code given before is worth nothing.
	code = b.allow(t, c, f)
	status, _, _ = do(t, c, http.MethodPost, b.s.URL+"/login/logout", nil, "Origin", b.s.URL)
	require.Equal(t, http.StatusOK, status)
	status, body = b.token(t, code, f.verifier, f.redirect)
	require.Equal(t, http.StatusUnauthorized, status, body)
	require.NotContains(t, b.logs.String(), code)
}

// TestDeviceSignInNeedsTheProvidersDeviceFlow: a provider whose discovery
// names no device endpoint refuses the device flow with a clear error.
func TestDeviceSignInNeedsTheProvidersDeviceFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	status, _, body := do(t, http.DefaultClient, http.MethodPost, b.s.URL+"/login/corp/device", nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "has no device flow")
	status, _, _ = do(t, http.DefaultClient, http.MethodPost, b.s.URL+"/login/nope/device", nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _, body = do(t, http.DefaultClient, http.MethodPost, b.s.URL+"/login/corp/device/token", map[string]any{"deviceCode": 7})
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "InputValidationError")
	down := setup(t, false)
	down.p.srv.Close()
	status, _, body = do(t, http.DefaultClient, http.MethodPost, down.s.URL+"/login/corp/device", nil)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Contains(t, body, "cannot be reached")
}

// BenchmarkCommandSignIn is a command's sign-in once the browser is
// signed in: hopper's page, Allow (a one-time code on SQLite) and the
// code traded with its PKCE verifier for credentials.
func BenchmarkCommandSignIn(b *testing.B) {
	bb := setup(b, false)
	status, page, c := bb.signIn(b)
	if status != http.StatusFound {
		b.Fatalf("sign-in: %d %s", status, page)
	}
	f := newCLIFlow()
	b.ResetTimer()
	for range b.N {
		code := bb.allow(b, c, f)
		if status, body := bb.token(b, code, f.verifier, f.redirect); status != http.StatusOK {
			b.Fatalf("token: %d %s", status, body)
		}
	}
}

// TestCommandSignInProviderDown: a provider that cannot be reached is
// told to the command's redirect at once, with its state.
func TestCommandSignInProviderDown(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	b.p.srv.Close()
	f := newCLIFlow()
	status, h, _ := do(t, http.DefaultClient, http.MethodGet, b.s.URL+"/login/corp/cli?"+f.query(), nil)
	require.Equal(t, http.StatusFound, status)
	to, err := url.Parse(h.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, f.redirect, to.Scheme+"://"+to.Host+to.Path)
	require.Equal(t, "temporarily_unavailable", to.Query().Get("error"))
	require.Equal(t, f.state, to.Query().Get("state"))
}
