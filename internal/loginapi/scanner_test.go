package loginapi_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
	"github.com/hopper-ci/hopper/internal/loginapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

func (b *ghBundle) scanner(holder string) *loginapi.Scanner {
	return &loginapi.Scanner{Server: b.srv, Store: b.s.Store, Roles: b.s.Security.Roles, Holder: holder,
		Actor: server.LoginClientID, Interval: time.Hour}
}

// people gives alice's and bob's teams scopes, and makes clients for
// them (and for carol, who never signed in here, and one that belongs to
// nobody).
func (b *ghBundle) people(t testing.TB) {
	t.Helper()
	ctx := t.Context()
	for role, scope := range map[string]string{"gh-team:acme/builders": "secrets:get:acme/*", "gh-team:acme/ops": "queue:create-task:lowest:acme/*"} {
		_, err := b.s.Root.CreateRole(ctx, role, &tcclient.RoleRequest{Description: "team", Scopes: []string{scope}})
		require.NoError(t, err)
	}
	for id, scopes := range map[string][]string{
		"gh/101|alice/ci":  {"secrets:get:acme/ci"},
		"gh/101|alice/ops": {"queue:create-task:lowest:acme/deploy", "secrets:get:acme/ops"},
		"gh/101|alice":     {"assume:gh-team:acme/builders"},
		"gh/202|bob/ci":    {"secrets:get:acme/ci"},
		"gh/303|carol/ci":  {},
		"ghost/x":          {"secrets:get:*"},
	} {
		_, err := b.s.Root.CreateClient(ctx, id, &tcclient.ClientRequest{Description: "made for a person", Scopes: scopes,
			Expires: tcclient.NewTime(b.clock.Now().Add(24 * time.Hour))})
		require.NoError(t, err)
	}
}

func (b *ghBundle) disabled(t testing.TB) []string {
	t.Helper()
	// The store, not the API: the test's clock runs ahead of Hawk's.
	all, _, err := b.s.Store.ListClients(t.Context(), "", store.Page{})
	require.NoError(t, err)
	var out []string
	for _, c := range all {
		if c.Disabled {
			out = append(out, c.ClientID)
		}
	}
	return out
}

func (b *ghBundle) history(t testing.TB, clientID string) []store.AuditEntry {
	t.Helper()
	h, _, err := b.s.Store.ListAuditHistory(t.Context(), store.AuditQuery{EntityType: store.AuditClient, EntityID: clientID}, store.Page{})
	require.NoError(t, err)
	return h
}

// TestScannerGitHub: a person removed from a GitHub team has the clients
// that need the team disabled within one pass, and keeps the others; a
// deleted account, and a person never seen, lose theirs; the audit log
// says the web-server's client did it; a GitHub that is down disables
// nothing; a second pass changes nothing. Their console session follows
// their teams.
func TestScannerGitHub(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setupGitHub(t, driver, false)
			alice := b.signIn(t, "alice")
			b.signIn(t, "bob")
			b.people(t)
			sc := b.scanner("replica-1")

			rep, err := sc.RunOnce(t.Context())
			require.NoError(t, err)
			require.Equal(t, loginapi.ScanReport{Scanned: 5, Disabled: 1}, rep, "only carol, never seen, loses hers")
			require.Equal(t, []string{"gh/303|carol/ci"}, b.disabled(t))

			b.gh.Put(forgetestUser(101, "alice", "acme/builders"))
			b.gh.Delete("bob")
			b.gh.SetDown(true)
			b.clock.Advance(2 * time.Hour)
			rep, err = sc.RunOnce(t.Context())
			require.NoError(t, err)
			require.Equal(t, loginapi.ScanReport{Scanned: 4, Unresolved: 4}, rep, "a provider that is down disables nothing")

			b.gh.SetDown(false)
			b.clock.Advance(2 * time.Hour)
			rep, err = sc.RunOnce(t.Context())
			require.NoError(t, err)
			require.Equal(t, loginapi.ScanReport{Scanned: 4, Disabled: 2}, rep)
			require.ElementsMatch(t, []string{"gh/101|alice/ops", "gh/202|bob/ci", "gh/303|carol/ci"}, b.disabled(t))
			h := b.history(t, "gh/101|alice/ops")
			last := h[len(h)-1]
			require.Equal(t, server.LoginClientID, last.ClientID)
			require.Equal(t, "client disabled", last.Action)

			status, got := b.credentials(t, alice)
			require.Equal(t, 200, status)
			require.Equal(t, []string{"gh-team:acme/builders"}, got.Roles, "the session follows the person's teams")
			_, err = b.s.Store.GetLoginIdentity(t.Context(), "gh/202|bob")
			require.ErrorIs(t, err, store.ErrNotFound, "a person gone is forgotten")

			b.clock.Advance(2 * time.Hour)
			rep, err = sc.RunOnce(t.Context())
			require.NoError(t, err)
			require.Equal(t, loginapi.ScanReport{Scanned: 2}, rep, "a second pass changes nothing")
		})
	}
}

// TestScannerReplicas: replicas scanning at once make one pass between
// them (the lease), so no client is disabled twice or recorded twice; the
// other replica takes over once the pass is due and the first is gone.
func TestScannerReplicas(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setupGitHub(t, driver, false)
			b.signIn(t, "alice")
			b.people(t)
			b.gh.Put(forgetestUser(101, "alice"))
			reports := make([]loginapi.ScanReport, 4)
			var wg sync.WaitGroup
			for i := range reports {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					reports[i], err = b.scanner("replica-" + string(rune('a'+i))).RunOnce(t.Context())
					require.NoError(t, err)
				}()
			}
			wg.Wait()
			disabled, skipped := 0, 0
			for _, r := range reports {
				disabled += r.Disabled
				if r.Skipped {
					skipped++
				}
			}
			require.Equal(t, 3, skipped, "one replica scans")
			require.Equal(t, 5, disabled, "alice's three, and bob's and carol's, never seen")
			for _, id := range []string{"gh/101|alice/ci", "gh/101|alice/ops", "gh/101|alice", "gh/202|bob/ci", "gh/303|carol/ci"} {
				n := 0
				for _, e := range b.history(t, id) {
					if e.Action == "client disabled" {
						n++
					}
				}
				require.Equal(t, 1, n, "%s disabled once", id)
			}

			rep, err := b.scanner("replica-z").RunOnce(t.Context())
			require.NoError(t, err)
			require.True(t, rep.Skipped, "no replica scans again before the pass is due")
			b.clock.Advance(61 * time.Minute)
			rep, err = b.scanner("replica-z").RunOnce(t.Context())
			require.NoError(t, err)
			require.False(t, rep.Skipped, "another replica takes over when the pass is due")
		})
	}
}

func forgetestUser(id int64, login string, teams ...string) forgetest.User {
	return forgetest.User{ID: id, Login: login, Teams: teams, Email: login + "@example.com", Verified: true}
}

// TestScannerOpenIDRefresh: for an OpenID provider (Gitea, Forgejo, any
// other) the scanner asks with the refresh token of the last sign-in:
// the new ID token's groups decide (a person who left a group loses the
// clients that need it), and a refused refresh (the account is gone)
// disables the rest.
func TestScannerOpenIDRefresh(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	status, page, _ := b.signIn(t)
	require.Equal(t, http.StatusFound, status, page)
	ctx := t.Context()
	for role, scope := range map[string]string{"corp-group:admins": "auth:*", "corp-group:dev team": "secrets:get:dev/*"} {
		_, err := b.s.Root.CreateRole(ctx, role, &tcclient.RoleRequest{Description: "group", Scopes: []string{scope}})
		require.NoError(t, err)
	}
	for id, scopes := range map[string][]string{
		"corp/u-42|Ann!20Example/admin": {"auth:create-client:corp/*"},
		"corp/u-42|Ann!20Example/dev":   {"secrets:get:dev/x"},
	} {
		_, err := b.s.Root.CreateClient(ctx, id, &tcclient.ClientRequest{Description: "made for a person", Scopes: scopes,
			Expires: tcclient.NewTime(time.Now().Add(time.Hour))})
		require.NoError(t, err)
	}
	sc := &loginapi.Scanner{Server: b.srv, Store: b.s.Store, Roles: b.s.Security.Roles, Holder: "r1", Actor: server.LoginClientID,
		Interval: time.Nanosecond, LeaseFor: time.Nanosecond}

	b.p.mu.Lock()
	b.p.groups = []string{"dev team"}
	b.p.mu.Unlock()
	rep, err := sc.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, loginapi.ScanReport{Scanned: 2, Disabled: 1}, rep)
	c, err := b.s.Store.GetClient(ctx, "corp/u-42|Ann!20Example/admin")
	require.NoError(t, err)
	require.True(t, c.Disabled, "no longer an admin")
	id, err := b.s.Store.GetLoginIdentity(ctx, "corp/u-42|Ann!20Example")
	require.NoError(t, err)
	require.Equal(t, []string{"corp-group:dev team"}, id.Roles)

	rep, err = sc.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, loginapi.ScanReport{Scanned: 1}, rep, "the rotated refresh token was kept")

	// The provider refusing hopper itself (its secret changed there) is
	// not the person's doing: nothing is disabled.
	b.p.mu.Lock()
	b.p.secret = "rotated-at-the-provider"
	b.p.mu.Unlock()
	rep, err = sc.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, loginapi.ScanReport{Scanned: 1, Unresolved: 1}, rep)

	b.p.mu.Lock()
	b.p.secret, b.p.revoked = "client-secret-value", true
	b.p.mu.Unlock()
	rep, err = sc.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, loginapi.ScanReport{Scanned: 1, Disabled: 1}, rep, "the account is gone")
	require.NotContains(t, b.logs.String(), "provider-access-token")
}
