package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testAuditHistory checks that client and role changes made with an
// *store.Audit are recorded with them, in their transaction (a refused
// change leaves no entry), listed oldest first by entity or by actor, paged,
// and expired by age.
func testAuditHistory(t *testing.T, open Opener) {
	e := setup(t, open)
	at := func(min int) time.Time { return Epoch.Add(time.Duration(min) * time.Minute) }
	by := func(who, action string, min int) *store.Audit {
		return &store.Audit{ClientID: who, Action: action, At: at(min)}
	}

	_, err := e.s.CreateClient(e.ctx, newClient("team/ci"), by("root", "created", 1))
	require.NoError(t, err)
	_, err = e.s.CreateClient(e.ctx, newClient("team/ci"), by("root", "created", 2))
	require.ErrorIs(t, err, store.ErrExists, "a create that finds the client taken changes nothing")
	_, err = e.s.UpdateClient(e.ctx, "team/ci", func(c *store.Client) error { c.Disabled = true; return nil }, by("admin", "client disabled", 3))
	require.NoError(t, err)
	refused := errors.New("refused")
	_, err = e.s.UpdateClient(e.ctx, "team/ci", func(*store.Client) error { return refused }, by("admin", "updated", 4))
	require.ErrorIs(t, err, refused)
	_, err = e.s.UpdateClient(e.ctx, "team/ci", func(c *store.Client) error { c.LastDateUsed = at(5); return nil }, nil)
	require.NoError(t, err, "an unaudited change (a client being used)")

	role := func(id string) func(*store.Role) (*store.Role, error) {
		return func(*store.Role) (*store.Role, error) {
			return &store.Role{RoleID: id, Scopes: []string{"a"}, Created: Epoch, LastModified: Epoch}, nil
		}
	}
	_, err = e.s.PutRole(e.ctx, "repo:x/*", role("repo:x/*"), by("admin", "", 6))
	require.NoError(t, err)
	_, err = e.s.PutRole(e.ctx, "repo:x/*", role("repo:x/*"), by("root", "", 7))
	require.NoError(t, err)
	_, err = e.s.PutRole(e.ctx, "repo:x/*", func(*store.Role) (*store.Role, error) { return nil, refused }, by("root", "", 8))
	require.ErrorIs(t, err, refused)
	require.NoError(t, e.s.DeleteRole(e.ctx, "repo:x/*", by("admin", "deleted", 9)))
	require.NoError(t, e.s.DeleteRole(e.ctx, "repo:x/*", by("admin", "deleted", 10)), "deleting nothing is not audited")
	require.NoError(t, e.s.DeleteClient(e.ctx, "team/ci", by("root", "deleted", 11)))
	require.NoError(t, e.s.DeleteClient(e.ctx, "team/ci", by("root", "deleted", 12)))

	list := func(q store.AuditQuery, page store.Page) ([]store.AuditEntry, string) {
		t.Helper()
		got, next, err := e.s.ListAuditHistory(e.ctx, q, page)
		require.NoError(t, err)
		return got, next
	}
	entry := func(kind, id, who, action string, min int) store.AuditEntry {
		return store.AuditEntry{EntityType: kind, EntityID: id, ClientID: who, Action: action, Created: at(min)}
	}
	got, next := list(store.AuditQuery{EntityType: store.AuditClient, EntityID: "team/ci"}, store.Page{})
	require.Equal(t, []store.AuditEntry{
		entry("client", "team/ci", "root", "created", 1),
		entry("client", "team/ci", "admin", "client disabled", 3),
		entry("client", "team/ci", "root", "deleted", 11),
	}, got)
	require.Empty(t, next)
	got, _ = list(store.AuditQuery{EntityType: store.AuditRole, EntityID: "repo:x/*"}, store.Page{})
	require.Equal(t, []store.AuditEntry{
		entry("role", "repo:x/*", "admin", "created", 6),
		entry("role", "repo:x/*", "root", "updated", 7),
		entry("role", "repo:x/*", "admin", "deleted", 9),
	}, got, "PutRole names the action by whether the role existed")

	// By actor, paged two at a time.
	var all []store.AuditEntry
	page := store.Page{Limit: 2}
	for {
		got, next := list(store.AuditQuery{ByClient: "admin"}, page)
		all = append(all, got...)
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	require.Equal(t, []store.AuditEntry{
		entry("client", "team/ci", "admin", "client disabled", 3),
		entry("role", "repo:x/*", "admin", "created", 6),
		entry("role", "repo:x/*", "admin", "deleted", 9),
	}, all)
	_, _, err = e.s.ListAuditHistory(e.ctx, store.AuditQuery{ByClient: "admin"}, store.Page{ContinuationToken: "!!"})
	require.ErrorIs(t, err, store.ErrBadContinuationToken)

	// An event with no change of its own: a shell opened in a task.
	require.NoError(t, e.s.RecordAudit(e.ctx, store.AuditTask, "fN0k1w1ORcSmJ5yW0QvQ2A", store.Audit{ClientID: "admin", Action: "interactive shell opened in run 0", At: at(13)}))
	got, _ = list(store.AuditQuery{EntityType: store.AuditTask, EntityID: "fN0k1w1ORcSmJ5yW0QvQ2A"}, store.Page{})
	require.Equal(t, []store.AuditEntry{entry("task", "fN0k1w1ORcSmJ5yW0QvQ2A", "admin", "interactive shell opened in run 0", 13)}, got)

	n, err := e.s.ExpireAuditHistory(e.ctx, at(7))
	require.NoError(t, err)
	require.Equal(t, 3, n, "the entries made before the cutoff")
	got, _ = list(store.AuditQuery{ByClient: "root"}, store.Page{})
	require.Equal(t, []store.AuditEntry{
		entry("role", "repo:x/*", "root", "updated", 7),
		entry("client", "team/ci", "root", "deleted", 11),
	}, got)
	got, _ = list(store.AuditQuery{ByClient: "admin"}, store.Page{})
	require.Equal(t, entry("task", "fN0k1w1ORcSmJ5yW0QvQ2A", "admin", "interactive shell opened in run 0", 13), got[len(got)-1])
}
