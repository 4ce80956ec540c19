package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestHopperLoginThroughGitea signs in from a terminal through a real
// Gitea as the guide's provider: `hopper login gitea` with a browser
// signed in to Gitea, which grants hopper access, then allows the
// command; the stored credentials carry bob's team role. Gitea has no
// device flow, which `hopper login --device` says.
func TestHopperLoginThroughGitea(t *testing.T) {
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
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	g.api(t, http.MethodPost, "/user/applications/oauth2", map[string]any{"name": "hopper", "confidential_client": true,
		"redirect_uris": []string{rootURL + "/login/gitea/callback"}}, &app)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "gitea-client-secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(app.ClientSecret+"\n"), 0o600))
	config := filepath.Join(dir, "login.json")
	require.NoError(t, os.WriteFile(config, []byte(`{"providers": [{"name": "gitea", "kind": "gitea", "displayName": "Gitea",
		"issuer": "`+g.url+`", "clientId": "`+app.ClientID+`", "clientSecretFile": "`+secretFile+`"}]}`), 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + config}})
	credFile := filepath.Join(dir, "credentials.json")
	env := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "HOPPER_CREDENTIALS=" + credFile}

	run := startLogin(t, env, "gitea", "--no-browser")
	start := run.address(t, regexp.MustCompile(`(http://\S+/login/gitea/cli\?\S+)`))[1]
	b := newBrowser(t)
	b.giteaSignIn(g, "bob", "bob-password-1")
	// hopper's page sends a browser not signed in to hopper to Gitea.
	status, h, _ := b.do(http.MethodGet, start, nil)
	require.Equal(t, http.StatusFound, status)
	status, h, _ = b.do(http.MethodGet, srv.RootURL+h.Get("Location"), nil)
	require.Equal(t, http.StatusFound, status)
	authorize := h.Get("Location")
	require.True(t, strings.HasPrefix(authorize, g.url+"/login/oauth/authorize?"), authorize)
	status, h, page := b.do(http.MethodGet, authorize, nil)
	if status == http.StatusOK { // Gitea's consent page, the first time
		form := hiddenFields(page)
		form.Set("granted", "true")
		status, h, page = b.do(http.MethodPost, g.url+"/login/oauth/grant", form)
	}
	require.Contains(t, []int{http.StatusFound, http.StatusSeeOther}, status, page)
	status, h, page = b.do(http.MethodGet, h.Get("Location"), nil) // hopper's callback
	require.Equal(t, http.StatusFound, status, page)
	back := h.Get("Location")
	require.True(t, strings.HasPrefix(back, "/login/gitea/cli?"), back)
	status, page = b.person(srv.RootURL+back, "bob", true)
	require.Equal(t, http.StatusOK, status, page)
	require.Contains(t, page, "Signed in")
	require.Equal(t, 0, run.wait(t), run.stderr.String())

	var stored struct{ Identity, ClientID, AccessToken, Certificate string }
	data, err := os.ReadFile(credFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &stored))
	require.Regexp(t, `^gitea/[0-9]+\|bob$`, stored.Identity)
	var cert struct{ Scopes []string }
	require.NoError(t, json.Unmarshal([]byte(stored.Certificate), &cert))
	require.Contains(t, cert.Scopes, "assume:gitea-team:acme/builders")

	// Gitea has no device flow: said, nothing written.
	require.NoError(t, os.Remove(credFile))
	run = startLogin(t, env, "gitea", "--device")
	require.Equal(t, 1, run.wait(t))
	require.Contains(t, run.stderr.String(), "has no device flow")
	_, err = os.Stat(credFile)
	require.ErrorIs(t, err, os.ErrNotExist)
}
