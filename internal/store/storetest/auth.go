package storetest

// The Auth service's rows: clients and roles (store.AuthStore).

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// newClient returns a client with millisecond times, as stored.
func newClient(id string) *store.Client {
	return &store.Client{
		ClientID: id, Description: "client " + id, AccessToken: "sealed:" + id, Scopes: []string{"queue:*", "assume:x"},
		Created: Epoch, LastModified: Epoch, LastDateUsed: Epoch, LastRotated: Epoch, Expires: Epoch.Add(24 * time.Hour),
	}
}

func testClients(t *testing.T, open Opener) {
	e := setup(t, open)
	c := newClient("c1")
	created, err := e.s.CreateClient(e.ctx, c, nil)
	require.NoError(t, err)
	require.Equal(t, c, created)
	got, err := e.s.GetClient(e.ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, c, got)

	// The id is taken: the existing client comes back with ErrExists.
	dup := newClient("c1")
	dup.Description = "another"
	existing, err := e.s.CreateClient(e.ctx, dup, nil)
	require.ErrorIs(t, err, store.ErrExists)
	require.Equal(t, c, existing)

	// Update mutates the stored client; an error from fn changes nothing.
	updated, err := e.s.UpdateClient(e.ctx, "c1", func(cl *store.Client) error {
		require.Equal(t, c, cl)
		cl.Description = "changed"
		cl.Scopes = []string{}
		cl.Disabled = true
		cl.DeleteOnExpiration = true
		cl.LastModified = Epoch.Add(time.Hour)
		return nil
	}, nil)
	require.NoError(t, err)
	got, err = e.s.GetClient(e.ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, updated, got)
	require.Equal(t, "changed", got.Description)
	require.Equal(t, []string{}, got.Scopes)
	require.True(t, got.Disabled)
	require.True(t, got.DeleteOnExpiration)

	refused := errors.New("refused")
	_, err = e.s.UpdateClient(e.ctx, "c1", func(cl *store.Client) error {
		cl.Description = "not stored"
		return refused
	}, nil)
	require.ErrorIs(t, err, refused)
	got, err = e.s.GetClient(e.ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, updated, got)
	_, err = e.s.UpdateClient(e.ctx, "nope", func(*store.Client) error { return nil }, nil)
	require.ErrorIs(t, err, store.ErrNotFound)

	_, err = e.s.CreateClient(e.ctx, newClient("c2"), nil)
	require.NoError(t, err)
	all, _, err := e.s.ListClients(e.ctx, "", store.Page{})
	require.NoError(t, err)
	require.Len(t, all, 2)

	require.NoError(t, e.s.DeleteClient(e.ctx, "c1", nil))
	_, err = e.s.GetClient(e.ctx, "c1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, e.s.DeleteClient(e.ctx, "c1", nil), "deleting twice is fine")
	all, _, err = e.s.ListClients(e.ctx, "", store.Page{})
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, "c2", all[0].ClientID)
}

func testRoles(t *testing.T, open Opener) {
	e := setup(t, open)
	version := func() int64 {
		t.Helper()
		v, err := e.s.RolesVersion(e.ctx)
		require.NoError(t, err)
		return v
	}
	v0 := version()
	roles, err := e.s.ListRoles(e.ctx)
	require.NoError(t, err)
	require.Empty(t, roles)

	r1 := &store.Role{RoleID: "repo:a/*", Scopes: []string{"queue:create-task:*"}, Description: "a", Created: Epoch, LastModified: Epoch}
	got, err := e.s.PutRole(e.ctx, r1.RoleID, func(existing *store.Role) (*store.Role, error) {
		require.Nil(t, existing)
		return r1, nil
	}, nil)
	require.NoError(t, err)
	require.Equal(t, r1, got)
	v1 := version()
	require.Greater(t, v1, v0)

	// fn sees the stored role; updates keep the creation time.
	r1b := &store.Role{RoleID: r1.RoleID, Scopes: []string{"queue:*"}, Description: "b", Created: Epoch, LastModified: Epoch.Add(time.Hour)}
	_, err = e.s.PutRole(e.ctx, r1.RoleID, func(existing *store.Role) (*store.Role, error) {
		require.Equal(t, r1, existing)
		return r1b, nil
	}, nil)
	require.NoError(t, err)
	v2 := version()
	require.Greater(t, v2, v1)

	// A refusal neither stores nor bumps the version.
	refused := errors.New("cycle")
	_, err = e.s.PutRole(e.ctx, "other", func(*store.Role) (*store.Role, error) { return nil, refused }, nil)
	require.ErrorIs(t, err, refused)
	require.Equal(t, v2, version())

	r2 := &store.Role{RoleID: "client-id:x", Scopes: []string{}, Description: "", Created: Epoch, LastModified: Epoch}
	_, err = e.s.PutRole(e.ctx, r2.RoleID, func(*store.Role) (*store.Role, error) { return r2, nil }, nil)
	require.NoError(t, err)
	roles, err = e.s.ListRoles(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []store.Role{*r2, *r1b}, roles)

	v3 := version()
	require.NoError(t, e.s.DeleteRole(e.ctx, r2.RoleID, nil))
	require.Greater(t, version(), v3)
	roles, err = e.s.ListRoles(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []store.Role{*r1b}, roles)
}
