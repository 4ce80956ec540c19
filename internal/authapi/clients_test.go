package authapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

func TestClientLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	expires := tcclient.NewTime(time.Now().Add(48 * time.Hour))

	created, err := b.root.CreateClient(ctx, "project/ci/builder", &tcclient.ClientRequest{
		Expires: expires, Description: "builds things", Scopes: []string{"queue:create-task:*", "assume:anonymous"},
	})
	require.NoError(t, err)
	require.Regexp(t, `^[A-Za-z0-9_-]{44}$`, created.AccessToken)
	require.Equal(t, "project/ci/builder", created.ClientID)
	require.Equal(t, []string{"queue:create-task:*", "assume:anonymous"}, created.Scopes, "scopes are stored as given")
	require.Contains(t, created.ExpandedScopes, "queue:get-task:*", "expanded through the anonymous role")
	require.Equal(t, expires.String(), created.Expires.String())
	require.False(t, created.Disabled)
	require.Equal(t, created.Created, created.LastRotated)

	got, err := b.root.GetClient(ctx, "project/ci/builder")
	require.NoError(t, err)
	require.Empty(t, got.AccessToken, "tokens are only shown by create and reset")
	require.Equal(t, created.Scopes, got.Scopes)

	// The new client authenticates, with its scopes plus the anonymous role.
	builder := b.as("project/ci/builder", created.AccessToken)
	scopes, err := builder.CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "queue:create-task:*")
	require.Contains(t, scopes, "assume:anonymous")

	// updateClient replaces what it is given; without scopes they stay.
	updated, err := b.root.UpdateClient(ctx, "project/ci/builder", &tcclient.ClientRequest{
		Expires: expires, Description: "builds more things",
	})
	require.NoError(t, err)
	require.Equal(t, "builds more things", updated.Description)
	require.Equal(t, created.Scopes, updated.Scopes)
	updated, err = b.root.UpdateClient(ctx, "project/ci/builder", &tcclient.ClientRequest{
		Expires: expires, Description: "builds more things", Scopes: []string{"queue:status:*"},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"queue:status:*"}, updated.Scopes)
	require.Empty(t, updated.AccessToken)

	// A reset token works at once and the old one stops working.
	reset, err := b.root.ResetAccessToken(ctx, "project/ci/builder")
	require.NoError(t, err)
	require.Len(t, reset.AccessToken, 44)
	require.NotEqual(t, created.AccessToken, reset.AccessToken)
	_, err = builder.CurrentScopes(ctx)
	requireAPIError(t, err, http.StatusUnauthorized, "AuthenticationFailed", "Bad mac")
	builder = b.as("project/ci/builder", reset.AccessToken)
	_, err = builder.CurrentScopes(ctx)
	require.NoError(t, err)

	// Disabled clients fail authentication; enabling restores them. Both
	// are idempotent.
	for range 2 {
		d, err := b.root.DisableClient(ctx, "project/ci/builder")
		require.NoError(t, err)
		require.True(t, d.Disabled)
	}
	_, err = builder.CurrentScopes(ctx)
	requireAPIError(t, err, http.StatusUnauthorized, "AuthenticationFailed", "Client with clientId 'project/ci/builder' is disabled")
	for range 2 {
		e, err := b.root.EnableClient(ctx, "project/ci/builder")
		require.NoError(t, err)
		require.False(t, e.Disabled)
	}
	_, err = builder.CurrentScopes(ctx)
	require.NoError(t, err)

	// Deleting answers 204 whether or not the client exists.
	require.NoError(t, b.root.DeleteClient(ctx, "project/ci/builder"))
	require.NoError(t, b.root.DeleteClient(ctx, "project/ci/builder"))
	_, err = b.root.GetClient(ctx, "project/ci/builder")
	requireAPIError(t, err, http.StatusNotFound, "ResourceNotFound", "Client not found")
	_, err = builder.CurrentScopes(ctx)
	requireAPIError(t, err, http.StatusUnauthorized, "AuthenticationFailed", "Client with clientId 'project/ci/builder' not found")
}

func TestClientNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	calls := map[string]func() error{
		"client":  func() error { _, err := b.root.GetClient(ctx, "nobody"); return err },
		"reset":   func() error { _, err := b.root.ResetAccessToken(ctx, "nobody"); return err },
		"enable":  func() error { _, err := b.root.EnableClient(ctx, "nobody"); return err },
		"disable": func() error { _, err := b.root.DisableClient(ctx, "nobody"); return err },
		"updateClient": func() error {
			_, err := b.root.UpdateClient(ctx, "nobody", &tcclient.ClientRequest{Expires: tcclient.NewTime(time.Now()), Description: "x"})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			requireAPIError(t, call(), http.StatusNotFound, "ResourceNotFound", "Client not found")
		})
	}
}

func TestCreateClientRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := &hawk.Credentials{ID: server.RootClientID, Key: rootToken}
	expires := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	body := map[string]any{"expires": expires, "description": "retry me", "scopes": []string{"a", "b"}}
	var first struct {
		AccessToken string `json:"accessToken"`
	}

	r := b.signed(t, root, http.MethodPut, "/api/auth/v1/clients/retry", body)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &first))

	// An identical request soon after is a retry: same token.
	r = b.signed(t, root, http.MethodPut, "/api/auth/v1/clients/retry", body)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var second struct {
		AccessToken string `json:"accessToken"`
	}
	require.NoError(t, json.Unmarshal(r.body, &second))
	require.Equal(t, first.AccessToken, second.AccessToken)

	differing := []map[string]any{
		{"expires": expires, "description": "something else", "scopes": []string{"a", "b"}},
		{"expires": expires, "description": "retry me", "scopes": []string{"b", "a"}},
		{"expires": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), "description": "retry me", "scopes": []string{"a", "b"}},
	}
	for _, d := range differing {
		r = b.signed(t, root, http.MethodPut, "/api/auth/v1/clients/retry", d)
		require.Equal(t, http.StatusConflict, r.status, "%v: %s", d, r.body)
		require.Equal(t, "RequestConflict", r.errorCode(t))
		require.Contains(t, string(r.body), "Client already exists")
	}

	// A disabled client is no retry target.
	r = b.signed(t, root, http.MethodPost, "/api/auth/v1/clients/retry/disable", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = b.signed(t, root, http.MethodPut, "/api/auth/v1/clients/retry", body)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	r = b.signed(t, root, http.MethodPost, "/api/auth/v1/clients/retry/enable", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// Fifteen minutes after creation it is a conflict too.
	b.clock.Advance(16 * time.Minute)
	r = b.signed(t, root, http.MethodPut, "/api/auth/v1/clients/retry", body)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.NotContains(t, string(r.body), first.AccessToken)
}

func TestAccessTokensAreSealedAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.newClient(t, "sealed/one", "x")
	other := b.newClient(t, "sealed/two", "x")

	stored, err := b.store.GetClient(ctx, "sealed/one")
	require.NoError(t, err)
	require.NotContains(t, stored.AccessToken, c.AccessToken)
	require.True(t, strings.HasPrefix(stored.AccessToken, "v1:"), "sealed format: %q", stored.AccessToken)
	opened, err := b.sealer.Open(stored.AccessToken, "sealed/one")
	require.NoError(t, err)
	require.Equal(t, c.AccessToken, opened)

	// A sealed token is bound to its client: moved to another row, it does
	// not open.
	_, err = b.sealer.Open(stored.AccessToken, "sealed/two")
	require.Error(t, err)

	// Reset seals the new token as well.
	reset, err := b.root.ResetAccessToken(ctx, "sealed/two")
	require.NoError(t, err)
	stored, err = b.store.GetClient(ctx, "sealed/two")
	require.NoError(t, err)
	require.NotContains(t, stored.AccessToken, reset.AccessToken)
	require.NotContains(t, stored.AccessToken, other.AccessToken)
	opened, err = b.sealer.Open(stored.AccessToken, "sealed/two")
	require.NoError(t, err)
	require.Equal(t, reset.AccessToken, opened)
}

func TestStaticClientsCannotChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := &tcclient.ClientRequest{Expires: tcclient.NewTime(time.Now().Add(time.Hour)), Description: "x"}
	calls := map[string]func(id string) error{
		"createClient":     func(id string) error { _, err := b.root.CreateClient(ctx, id, req); return err },
		"updateClient":     func(id string) error { _, err := b.root.UpdateClient(ctx, id, req); return err },
		"resetAccessToken": func(id string) error { _, err := b.root.ResetAccessToken(ctx, id); return err },
		"enableClient":     func(id string) error { _, err := b.root.EnableClient(ctx, id); return err },
		"disableClient":    func(id string) error { _, err := b.root.DisableClient(ctx, id); return err },
		"deleteClient":     func(id string) error { return b.root.DeleteClient(ctx, id) },
	}
	for name, call := range calls {
		for _, id := range []string{server.RootClientID, server.QueueClientID, "static/anything"} {
			t.Run(name+"/"+id, func(t *testing.T) {
				t.Parallel()
				requireAPIError(t, call(id), http.StatusBadRequest, "InputError", `starts with "static/"`)
			})
		}
	}

	// They can be read (without a token), and root still works after all
	// of the attempts above.
	t.Run("read", func(t *testing.T) {
		t.Parallel()
		c, err := b.root.GetClient(ctx, server.RootClientID)
		require.NoError(t, err)
		require.Equal(t, []string{"*"}, c.Scopes)
		require.Equal(t, []string{"*"}, c.ExpandedScopes)
		require.Empty(t, c.AccessToken)
		require.False(t, c.Disabled)
	})
}

func TestClientScopeChecks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	manager := b.newClient(t, "manager", "auth:create-client:team/*", "auth:update-client:team/*", "queue:status:*", "team:a")
	m := b.as("manager", manager.AccessToken)
	expires := tcclient.NewTime(time.Now().Add(time.Hour))

	_, err := m.CreateClient(ctx, "team/ok", &tcclient.ClientRequest{Expires: expires, Description: "x", Scopes: []string{"team:a", "queue:status:abc"}})
	require.NoError(t, err)
	_, err = m.CreateClient(ctx, "team/greedy", &tcclient.ClientRequest{Expires: expires, Description: "x", Scopes: []string{"team:a", "team:b"}})
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "Client ID manager does not have sufficient scopes")
	require.Contains(t, err.Error(), "team:b")
	_, err = m.CreateClient(ctx, "other/x", &tcclient.ClientRequest{Expires: expires, Description: "x"})
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "auth:create-client:other/x")
	_, err = m.CreateClient(ctx, "team/stars", &tcclient.ClientRequest{Expires: expires, Description: "x", Scopes: []string{"team:**"}})
	requireAPIError(t, err, http.StatusBadRequest, "InputError", "scopes must not end with `**`")

	// updateClient only requires the scopes being added: root gives the
	// client a scope the manager lacks, and the manager may still edit it
	// as long as it adds nothing it does not hold.
	_, err = b.root.UpdateClient(ctx, "team/ok", &tcclient.ClientRequest{Expires: expires, Description: "x", Scopes: []string{"team:a", "secret:thing"}})
	require.NoError(t, err)
	_, err = m.UpdateClient(ctx, "team/ok", &tcclient.ClientRequest{Expires: expires, Description: "kept", Scopes: []string{"secret:thing", "team:a"}})
	require.NoError(t, err)
	_, err = m.UpdateClient(ctx, "team/ok", &tcclient.ClientRequest{Expires: expires, Description: "kept", Scopes: []string{"secret:thing", "secret:other"}})
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "secret:other")

	// Without credentials the reply says which credentials are needed.
	_, err = b.anonymous().CreateClient(ctx, "team/anon", &tcclient.ClientRequest{Expires: expires, Description: "x"})
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "This request requires Taskcluster credentials")
}

func TestListClients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"list/a", "list/b", "list/c", "other/d"} {
		b.newClient(t, id, "s:"+id)
	}
	all, err := b.root.AllClients(ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 4)

	var ids []string
	opts := tcclient.ListOptions{Limit: 1}
	for {
		page, err := b.root.ListClients(ctx, "list/", opts)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Clients), 1)
		for _, c := range page.Clients {
			require.Empty(t, c.AccessToken)
			require.Equal(t, []string{"s:" + c.ClientID}, c.Scopes)
			ids = append(ids, c.ClientID)
		}
		if page.ContinuationToken == "" {
			break
		}
		opts.ContinuationToken = page.ContinuationToken
	}
	require.Equal(t, []string{"list/a", "list/b", "list/c"}, ids)

	_, err = b.root.ListClients(ctx, "", tcclient.ListOptions{ContinuationToken: "!!not a token"})
	requireAPIError(t, err, http.StatusBadRequest, "InputError", "Invalid continuationToken")
	_, err = b.root.ListClients(ctx, "bad prefix", tcclient.ListOptions{})
	requireAPIError(t, err, http.StatusBadRequest, "InvalidRequestArguments", "prefix")

	// Anonymous callers may list (the default anonymous role allows it),
	// and the listing never carries tokens.
	page, err := b.anonymous().ListClients(ctx, "", tcclient.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Clients, 4)
}

func TestClientIDParameter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t, "with/slash", "x")
	root := &hawk.Credentials{ID: server.RootClientID, Key: rootToken}
	tests := []struct {
		name   string
		method string
		path   string
		status int
		code   string
	}{
		{"encoded slash", http.MethodGet, "/api/auth/v1/clients/with%2Fslash", http.StatusOK, ""},
		{"raw slash", http.MethodGet, "/api/auth/v1/clients/with/slash", http.StatusOK, ""},
		{"invalid character", http.MethodGet, "/api/auth/v1/clients/bad%20id", http.StatusBadRequest, "InvalidRequestArguments"},
		{"invalid character on reset", http.MethodPost, "/api/auth/v1/clients/bad%20id/reset", http.StatusBadRequest, "InvalidRequestArguments"},
		{"encoded slash on disable", http.MethodPost, "/api/auth/v1/clients/with%2Fslash/disable", http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.signed(t, root, tt.method, tt.path, nil)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			if tt.code != "" {
				require.Equal(t, tt.code, r.errorCode(t))
			}
			require.NotContains(t, string(r.body), c.AccessToken)
		})
	}
}
