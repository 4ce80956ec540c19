package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestLoginThroughGitHubAndScanner follows docs/login.md's GitHub and
// scanner sections with `hopper serve`: a person signs in through a
// GitHub Enterprise Server (a local one that enforces GitHub's API
// description), gets their team's role, makes a client of their own with
// their temporary credentials; once GitHub no longer lists them in the
// team, the server's scanner disables the client within a pass, and the
// audit log says the web-server's client did it.
func TestLoginThroughGitHubAndScanner(t *testing.T) {
	t.Parallel()
	gh := forgetest.StartUsers(t, "Iv1.e2e", "ghe-secret-value")
	listen := e2e.FreePort(t)
	rootURL := "http://" + listen
	gh.Redirect = rootURL + "/login/ghe/callback"
	gh.Put(forgetest.User{ID: 101, Login: "alice", Teams: []string{"acme/builders"}, Email: "alice@example.com", Verified: true})
	gh.SignInAs("alice")

	dir := t.TempDir()
	secretFile := filepath.Join(dir, "github-client-secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("github-com-secret-not-used-here\n"), 0o600))
	config := filepath.Join(dir, "login.json")
	require.NoError(t, os.WriteFile(config, []byte(e2e.DocExample(t, "login-github-config").Replace(t,
		"https://ghe.example.com", gh.Server.URL, `"Iv1.…"`, `"Iv1.e2e"`, "/etc/hopper/github-client-secret", secretFile,
		`"15m"`, `"10s"`)), 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + config,
		"HOPPER_GHE_CLIENT_SECRET=ghe-secret-value"}})
	out, err := e2e.DocShell{Env: srv.Env()}.Run(t, e2e.DocExample(t, "login-github-role"))
	require.NoError(t, err, out)

	// The browser: to GitHub and back, stopping at the console.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.Path, "/ui/") {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := b.Get(srv.RootURL + "/login/ghe?returnTo=/ui/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	resp, err = b.Post(srv.RootURL+"/login/credentials", "", nil)
	require.NoError(t, err)
	var got struct {
		Identity    string
		Roles       []string
		Credentials tcclient.Credentials
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	resp.Body.Close()
	require.Equal(t, "ghe/101|alice", got.Identity)
	require.Equal(t, []string{"ghe-team:acme/builders"}, got.Roles)

	// Alice makes a client of her own with her temporary credentials.
	ctx := context.Background()
	alice := &tcclient.Client{RootURL: srv.RootURL, Credentials: &got.Credentials}
	_, err = alice.CreateClient(ctx, "ghe/101|alice/ci", &tcclient.ClientRequest{Description: "alice's CI",
		Scopes: []string{"secrets:get:acme/ci"}, Expires: tcclient.NewTime(time.Now().Add(24 * time.Hour))})
	require.NoError(t, err)

	// She leaves the team on GitHub; a pass of the scanner (every 10s
	// here) disables the client.
	gh.Put(forgetest.User{ID: 101, Login: "alice", Email: "alice@example.com", Verified: true})
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	require.Eventually(t, func() bool {
		c, err := root.GetClient(ctx, "ghe/101|alice/ci")
		return err == nil && c.Disabled
	}, 3*time.Minute, 500*time.Millisecond, "the scanner disables alice's client")

	out, err = e2e.DocShell{Env: srv.Env()}.Run(t, e2e.DocExample(t, "login-scanner-audit"))
	require.NoError(t, err, out)
	want := e2e.DocExample(t, "login-scanner-audit-output").Text
	for _, line := range strings.Split(strings.TrimSpace(want), "\n")[1:] {
		fields := strings.Fields(line)
		require.Contains(t, out, fields[1]+"  ", "who: %s", out)
		require.Contains(t, out, strings.Join(fields[2:len(fields)-2], " "), "what: %s", out)
	}
	require.NotContains(t, srv.Logs(), "ghe-secret-value")
	require.NotContains(t, srv.Logs(), "gho_")
	require.NotContains(t, srv.Logs(), got.Credentials.AccessToken)
}
