package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testLoginIdentities: a person is recorded and replaced as last seen,
// their sessions follow their roles, and forgetting them ends their
// sessions but no one else's.
func testLoginIdentities(t *testing.T, open Opener) {
	e := setup(t, open)
	_, err := e.s.GetLoginIdentity(e.ctx, "gh/1|alice")
	require.ErrorIs(t, err, store.ErrNotFound)

	for _, s := range []store.LoginSession{
		{IDHash: "a1", Provider: "gh", Identity: "gh/1|alice", Roles: []string{"gh-team:acme/a"}, Created: Epoch, Expires: Epoch.Add(time.Hour)},
		{IDHash: "b1", Provider: "gh", Identity: "gh/2|bob", Roles: []string{"gh-team:acme/b"}, Created: Epoch, Expires: Epoch.Add(time.Hour)},
	} {
		require.NoError(t, e.s.CreateLoginSession(e.ctx, s))
	}
	id := store.LoginIdentity{Identity: "gh/1|alice", Provider: "gh", Roles: []string{"gh-team:acme/a"}, Grant: "sealed-1", Updated: Epoch}
	require.NoError(t, e.s.PutLoginIdentity(e.ctx, id))
	got, err := e.s.GetLoginIdentity(e.ctx, id.Identity)
	require.NoError(t, err)
	require.Equal(t, id, *got)

	id.Roles, id.Grant, id.Updated = nil, "sealed-2", Epoch.Add(time.Minute)
	require.NoError(t, e.s.PutLoginIdentity(e.ctx, id))
	got, err = e.s.GetLoginIdentity(e.ctx, id.Identity)
	require.NoError(t, err)
	require.Equal(t, []string{}, got.Roles)
	require.Equal(t, "sealed-2", got.Grant)
	sess, err := e.s.GetLoginSession(e.ctx, "a1", Epoch)
	require.NoError(t, err)
	require.Equal(t, []string{}, sess.Roles, "a session follows its person's roles")
	sess, err = e.s.GetLoginSession(e.ctx, "b1", Epoch)
	require.NoError(t, err)
	require.Equal(t, []string{"gh-team:acme/b"}, sess.Roles, "and no one else's")

	require.NoError(t, e.s.ForgetLoginIdentity(e.ctx, id.Identity))
	require.NoError(t, e.s.ForgetLoginIdentity(e.ctx, id.Identity), "forgetting twice is harmless")
	_, err = e.s.GetLoginIdentity(e.ctx, id.Identity)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.s.GetLoginSession(e.ctx, "a1", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound, "a person gone is signed out")
	_, err = e.s.GetLoginSession(e.ctx, "b1", Epoch)
	require.NoError(t, err)
}
