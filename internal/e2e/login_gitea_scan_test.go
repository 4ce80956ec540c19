package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestScannerThroughGitea: people who signed in through a real Gitea make
// clients of their own; bob is removed from his Gitea team and carol's
// account is deleted; within a pass of `hopper serve`'s credential
// scanner (every 10s here), which asks Gitea again with each person's
// refresh token, both clients are disabled, and the audit log says the
// web-server's client did it.
func TestScannerThroughGitea(t *testing.T) {
	t.Parallel()
	g := startGitea(t)
	g.api(t, http.MethodPost, "/orgs", map[string]any{"username": "acme"}, nil)
	var team struct{ ID int64 }
	g.api(t, http.MethodPost, "/orgs/acme/teams", map[string]any{"name": "builders", "permission": "read", "units": []string{"repo.code"}}, &team)
	for _, user := range []string{"bob", "carol"} {
		g.api(t, http.MethodPost, "/admin/users", map[string]any{"username": user, "email": user + "@example.com",
			"password": user + "-password-1", "must_change_password": false}, nil)
		g.api(t, http.MethodPut, fmt.Sprintf("/teams/%d/members/%s", team.ID, user), nil, nil)
	}

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
	config, err := json.Marshal(map[string]any{"scanInterval": "10s", "providers": []any{map[string]any{"name": "gitea", "kind": "gitea",
		"issuer": g.url, "clientId": app.ClientID, "clientSecretFile": secretFile}}})
	require.NoError(t, err)
	configFile := filepath.Join(dir, "login.json")
	require.NoError(t, os.WriteFile(configFile, config, 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + configFile}})
	ctx := context.Background()
	root := rootClient(srv)
	for role, scope := range map[string]string{"gitea-team:acme/builders": "secrets:get:acme/*",
		"login-identity:gitea/*": "auth:create-client:gitea/<..>/*"} {
		_, err := root.CreateRole(ctx, role, &tcclient.RoleRequest{Description: "e2e", Scopes: []string{scope}})
		require.NoError(t, err)
	}

	// Each signs in through Gitea and makes a client with their
	// credentials.
	clients := map[string]string{}
	for _, user := range []string{"bob", "carol"} {
		b := newBrowser(t)
		b.giteaSignIn(g, user, user+"-password-1")
		status, _, page := b.do(http.MethodGet, b.toCallback(g, srv.RootURL, "gitea"), nil)
		require.Equal(t, http.StatusFound, status, page)
		status, _, body := b.do(http.MethodPost, srv.RootURL+"/login/credentials", nil, "Origin", srv.RootURL)
		require.Equal(t, http.StatusOK, status, body)
		var got struct {
			Identity    string
			Credentials tcclient.Credentials
		}
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		clients[user] = got.Identity + "/ci"
		person := &tcclient.Client{RootURL: srv.RootURL, Credentials: &got.Credentials}
		_, err := person.CreateClient(ctx, clients[user], &tcclient.ClientRequest{Description: user + "'s CI",
			Scopes: []string{"secrets:get:acme/ci"}, Expires: tcclient.NewTime(time.Now().Add(24 * time.Hour))})
		require.NoError(t, err)
	}

	// Bob leaves the team; carol's account is deleted.
	g.api(t, http.MethodDelete, fmt.Sprintf("/teams/%d/members/bob", team.ID), nil, nil)
	g.api(t, http.MethodDelete, "/admin/users/carol?purge=true", nil, nil)
	for user, id := range clients {
		require.Eventually(t, func() bool {
			c, err := root.GetClient(ctx, id)
			return err == nil && c.Disabled
		}, 3*time.Minute, time.Second, "the scanner disables %s's client", user)
		h, err := root.GetEntityHistory(ctx, "client", id, tcclient.ListOptions{})
		require.NoError(t, err)
		last := h.AuditHistory[len(h.AuditHistory)-1]
		require.Equal(t, "static/taskcluster/web-server", last.ClientID)
		require.Equal(t, "client disabled", last.ActionType)
	}
	require.NotContains(t, srv.Logs(), app.ClientSecret)
}
