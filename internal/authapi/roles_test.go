package authapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

func TestRoleLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Scopes are sorted on create (star before the plain prefix).
	role, err := b.root.CreateRole(ctx, "group:admins", &tcclient.RoleRequest{
		Scopes: []string{"queue:status", "assume:group:devs", "admin-scope", "queue:status*"}, Description: "admins",
	})
	require.NoError(t, err)
	require.Equal(t, []string{"admin-scope", "assume:group:devs", "queue:status*", "queue:status"}, role.Scopes)
	// Expansion normalizes: queue:status is implied by queue:status*.
	require.Equal(t, []string{"admin-scope", "assume:group:admins", "assume:group:devs", "queue:status*"}, role.ExpandedScopes)
	require.Equal(t, role.Created, role.LastModified)

	// An identical create is a retry; a different one conflicts.
	again, err := b.root.CreateRole(ctx, "group:admins", &tcclient.RoleRequest{
		Scopes: []string{"queue:status*", "admin-scope", "queue:status", "assume:group:devs"}, Description: "admins",
	})
	require.NoError(t, err)
	require.Equal(t, role.Created, again.Created)
	_, err = b.root.CreateRole(ctx, "group:admins", &tcclient.RoleRequest{Scopes: []string{"admin-scope"}, Description: "admins"})
	requireAPIError(t, err, http.StatusConflict, "RequestConflict", "Role with roleId 'group:admins' already exists")

	// A role created later is picked up by expansion at once.
	_, err = b.root.CreateRole(ctx, "group:devs", &tcclient.RoleRequest{Scopes: []string{"dev-scope"}, Description: "devs"})
	require.NoError(t, err)
	role, err = b.root.GetRole(ctx, "group:admins")
	require.NoError(t, err)
	require.Contains(t, role.ExpandedScopes, "dev-scope")

	// Clients get role scopes through assume:.
	admin := b.newClient(t, "admin", "assume:group:admins")
	scopes, err := b.as("admin", admin.AccessToken).CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "dev-scope")
	require.Contains(t, scopes, "admin-scope")
	got, err := b.root.GetClient(ctx, "admin")
	require.NoError(t, err)
	require.Equal(t, []string{"admin-scope", "assume:group:admins", "assume:group:devs", "dev-scope", "queue:status*"}, got.ExpandedScopes,
		"client expansion leaves the anonymous role out")

	// Updates keep the given order, bump lastModified and take effect.
	updated, err := b.root.UpdateRole(ctx, "group:devs", &tcclient.RoleRequest{Scopes: []string{"z-scope", "dev-scope"}, Description: "devs v2"})
	require.NoError(t, err)
	require.Equal(t, []string{"z-scope", "dev-scope"}, updated.Scopes)
	require.Equal(t, "devs v2", updated.Description)
	scopes, err = b.as("admin", admin.AccessToken).CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "z-scope")

	_, err = b.root.UpdateRole(ctx, "group:nobody", &tcclient.RoleRequest{Scopes: []string{}, Description: "x"})
	requireAPIError(t, err, http.StatusNotFound, "ResourceNotFound", "Role with roleId 'group:nobody' not found")
	_, err = b.root.GetRole(ctx, "group:nobody")
	requireAPIError(t, err, http.StatusNotFound, "ResourceNotFound", "Role with roleId 'group:nobody' not found")

	// Deleting answers 204 whether or not the role exists, and the grant
	// disappears.
	require.NoError(t, b.root.DeleteRole(ctx, "group:devs"))
	require.NoError(t, b.root.DeleteRole(ctx, "group:devs"))
	scopes, err = b.as("admin", admin.AccessToken).CurrentScopes(ctx)
	require.NoError(t, err)
	require.NotContains(t, scopes, "z-scope")
}

func TestRoleSetValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		before map[string][]string // roles created first
		roleID string
		scopes []string
		update bool
		msg    string // "" means accepted
	}{
		{name: "self loop", roleID: "a", scopes: []string{"assume:a"}, msg: "Roles may not contain dependency cycles, found: 'assume:a' -> 'assume:a'"},
		{name: "two-role cycle", before: map[string][]string{"b": {"assume:a"}}, roleID: "a", scopes: []string{"assume:b"},
			msg: "Roles may not contain dependency cycles"},
		{name: "star grant", roleID: "admin", scopes: []string{"*"}, msg: "dependency cycles"},
		{name: "assume star", roleID: "admin", scopes: []string{"assume:*"}, msg: "dependency cycles"},
		{name: "two params", roleID: "p*", scopes: []string{"x:<..>/<..>"}, msg: "parameterized scope 'x:<..>/<..>' contains multiple '<..>'"},
		{name: "ambiguous kleene", roleID: "p*", scopes: []string{"x*<..>"}, msg: "ends with '*<..>' which implies an ambiguous kleene"},
		{name: "kleene in the middle", roleID: "p*", scopes: []string{"x*<..>y"}},
		{name: "cycle by update", before: map[string][]string{"a": {"assume:b"}, "b": {"plain"}}, roleID: "b", scopes: []string{"assume:a"}, update: true,
			msg: "dependency cycles"},
		{name: "harmless update", before: map[string][]string{"a": {"assume:b"}, "b": {"plain"}}, roleID: "b", scopes: []string{"other"}, update: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			for id, scopes := range tt.before {
				_, err := b.root.CreateRole(ctx, id, &tcclient.RoleRequest{Scopes: scopes, Description: id})
				require.NoError(t, err)
			}
			req := &tcclient.RoleRequest{Scopes: tt.scopes, Description: "under test"}
			var err error
			if tt.update {
				_, err = b.root.UpdateRole(ctx, tt.roleID, req)
			} else {
				_, err = b.root.CreateRole(ctx, tt.roleID, req)
			}
			if tt.msg == "" {
				require.NoError(t, err)
				return
			}
			requireAPIError(t, err, http.StatusBadRequest, "InputError", tt.msg)
			// A refused change leaves the role set as it was.
			ids, err := b.root.ListRoleIDs(ctx, tcclient.ListOptions{})
			require.NoError(t, err)
			require.Len(t, ids.RoleIDs, len(tt.before)+1, "roles: %v", ids.RoleIDs) // + anonymous
			if tt.update {
				role, err := b.root.GetRole(ctx, tt.roleID)
				require.NoError(t, err)
				require.Equal(t, tt.before[tt.roleID], role.Scopes)
			}
		})
	}
}

func TestRoleScopeChecks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.root.CreateRole(ctx, "team-base", &tcclient.RoleRequest{Scopes: []string{"team:read:*"}, Description: "base"})
	require.NoError(t, err)
	_, err = b.root.CreateRole(ctx, "team-ci", &tcclient.RoleRequest{Scopes: []string{"assume:team-base", "secret:ci"}, Description: "ci"})
	require.NoError(t, err)
	editor := b.newClient(t, "editor", "auth:create-role:team-*", "auth:update-role:team-*", "team:write")
	e := b.as("editor", editor.AccessToken)

	_, err = e.CreateRole(ctx, "team-new", &tcclient.RoleRequest{Scopes: []string{"team:write"}, Description: "ok"})
	require.NoError(t, err)
	_, err = e.CreateRole(ctx, "team-greedy", &tcclient.RoleRequest{Scopes: []string{"team:admin"}, Description: "no"})
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "team:admin")
	_, err = e.CreateRole(ctx, "other", &tcclient.RoleRequest{Scopes: []string{}, Description: "no"})
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "auth:create-role:other")
	_, err = e.CreateRole(ctx, "team-stars", &tcclient.RoleRequest{Scopes: []string{"x**"}, Description: "no"})
	requireAPIError(t, err, http.StatusBadRequest, "InputError", "scopes must not end with `**`")

	// updateRole requires only scopes the role's former scopes, expanded,
	// do not already satisfy: team:read:x is covered through team-base,
	// secret:ci is kept, team:write is held by the editor.
	_, err = e.UpdateRole(ctx, "team-ci", &tcclient.RoleRequest{Scopes: []string{"secret:ci", "team:read:x", "team:write"}, Description: "ci v2"})
	require.NoError(t, err)
	_, err = e.UpdateRole(ctx, "team-ci", &tcclient.RoleRequest{Scopes: []string{"secret:ci", "secret:prod"}, Description: "ci v3"})
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "secret:prod")
}

func TestListRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		_, err := b.root.CreateRole(ctx, id, &tcclient.RoleRequest{Scopes: []string{"s:" + id}, Description: id})
		require.NoError(t, err)
	}
	want := []string{"anonymous", "r1", "r2", "r3", "r4"}

	all, err := b.root.ListRoles(ctx)
	require.NoError(t, err)
	var ids []string
	for _, r := range all {
		ids = append(ids, r.RoleID)
		require.Contains(t, r.ExpandedScopes, "assume:"+r.RoleID)
	}
	require.Equal(t, want, ids)

	// Without a limit everything comes at once, without a token.
	page, err := b.root.ListRoleIDs(ctx, tcclient.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, want, page.RoleIDs)
	require.Empty(t, page.ContinuationToken)

	for _, limit := range []int{1, 2, 4, 5, 10} {
		ids = nil
		var roles []string
		opts := tcclient.ListOptions{Limit: limit}
		opts2 := tcclient.ListOptions{Limit: limit}
		for range 10 {
			p, err := b.root.ListRoleIDs(ctx, opts)
			require.NoError(t, err)
			require.LessOrEqual(t, len(p.RoleIDs), limit)
			ids = append(ids, p.RoleIDs...)
			p2, err := b.root.ListRoles2(ctx, opts2)
			require.NoError(t, err)
			for _, r := range p2.Roles {
				roles = append(roles, r.RoleID)
			}
			require.Equal(t, p.ContinuationToken == "", p2.ContinuationToken == "")
			if p.ContinuationToken == "" {
				break
			}
			opts.ContinuationToken, opts2.ContinuationToken = p.ContinuationToken, p2.ContinuationToken
		}
		require.Equal(t, want, ids, "limit %d", limit)
		require.Equal(t, want, roles, "limit %d", limit)
	}

	for _, token := range []string{"garbage!", "cm9sZXNAeA", "b3RoZXJAMQ"} { // not base64url, roles@x, other@1
		_, err = b.root.ListRoleIDs(ctx, tcclient.ListOptions{ContinuationToken: token, Limit: 1})
		requireAPIError(t, err, http.StatusBadRequest, "InputError", "Invalid continuationToken")
		_, err = b.root.ListRoles2(ctx, tcclient.ListOptions{ContinuationToken: token})
		requireAPIError(t, err, http.StatusBadRequest, "InputError", "Invalid continuationToken")
	}
}

func TestRoleIDParameter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// roleIds may contain anything printable; clients percent-encode them.
	const id = "repo:github.com/x/y:branch:*"
	_, err := b.root.CreateRole(ctx, id, &tcclient.RoleRequest{Scopes: []string{"secrets:get:<..>"}, Description: "odd id"})
	require.NoError(t, err)
	role, err := b.root.GetRole(ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, role.RoleID)

	root := &hawk.Credentials{ID: server.RootClientID, Key: rootToken}
	r := b.signed(t, root, http.MethodGet, "/api/auth/v1/roles/repo:github.com/x/y:branch:*", nil)
	require.Equal(t, http.StatusOK, r.status, "raw slashes work too: %s", r.body)
	r = b.signed(t, root, http.MethodGet, "/api/auth/v1/roles/bad%09id", nil)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Equal(t, "InvalidRequestArguments", r.errorCode(t))

	// The parameter reaches expansion.
	scopes, err := b.root.ExpandScopes(ctx, []string{"assume:repo:github.com/x/y:branch:main"})
	require.NoError(t, err)
	require.Equal(t, []string{"assume:repo:github.com/x/y:branch:main", "secrets:get:main"}, scopes)
}

// TestConcurrentRolesCannotFormACycle creates the two halves of a cycle at
// the same time: validation runs while the role set is locked, so at most
// one of them can succeed.
func TestConcurrentRolesCannotFormACycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := range 5 {
		x, y := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
		errs := make(chan error, 2)
		for _, pair := range [][2]string{{x, y}, {y, x}} {
			go func() {
				_, err := b.root.CreateRole(ctx, pair[0], &tcclient.RoleRequest{Scopes: []string{"assume:" + pair[1]}, Description: "half"})
				errs <- err
			}()
		}
		var failed int
		for range 2 {
			if err := <-errs; err != nil {
				requireAPIError(t, err, http.StatusBadRequest, "InputError", "dependency cycles")
				failed++
			}
		}
		require.Equal(t, 1, failed, "round %d", i)
	}
	// The stored set is still valid: expansion works for everyone.
	_, err := b.root.ExpandScopes(ctx, []string{"assume:x0", "assume:y0"})
	require.NoError(t, err)
}
