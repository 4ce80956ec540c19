package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/secrets"
	"github.com/hopper-ci/hopper/internal/store"
)

// testSecrets covers the sealed key-value store: create and replace,
// reads of expired values (the rules decide what to answer), listing
// names with paging, removal and data expiry.
func testSecrets(t *testing.T, open Opener) {
	e := setup(t, open)
	put := func(name, sealed string, expires time.Time) bool {
		t.Helper()
		created, err := e.s.PutSecret(e.ctx, &secrets.Secret{Name: name, Sealed: sealed, Expires: expires})
		require.NoError(t, err)
		return created
	}
	require.True(t, put("proj/a", "v1:one", Epoch.Add(time.Hour)))
	require.False(t, put("proj/a", "v1:two", Epoch.Add(2*time.Hour)))
	got, err := e.s.GetSecret(e.ctx, "proj/a")
	require.NoError(t, err)
	require.Equal(t, "v1:two", got.Sealed)
	require.True(t, got.Expires.Equal(Epoch.Add(2*time.Hour)))
	_, err = e.s.GetSecret(e.ctx, "missing")
	require.ErrorIs(t, err, store.ErrNotFound)

	for _, n := range []string{"proj/b", "proj/c", "proj/d"} {
		put(n, "v1:x", Epoch.Add(time.Hour))
	}
	put("proj/old", "v1:x", Epoch.Add(-time.Minute))
	var names []string
	page := store.Page{Limit: 3}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 4)
		got, next, err := e.s.ListSecrets(e.ctx, Epoch, page)
		require.NoError(t, err)
		names = append(names, got...)
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	require.Equal(t, []string{"proj/a", "proj/b", "proj/c", "proj/d"}, names, "expired secrets are not listed")
	got, err = e.s.GetSecret(e.ctx, "proj/old")
	require.NoError(t, err, "an expired secret is still stored until data expiry")
	require.True(t, got.Expires.Before(Epoch))

	require.NoError(t, e.s.DeleteSecret(e.ctx, "proj/b"))
	require.NoError(t, e.s.DeleteSecret(e.ctx, "proj/b"))
	_, err = e.s.GetSecret(e.ctx, "proj/b")
	require.ErrorIs(t, err, store.ErrNotFound)

	n, err := e.s.ExpireSecrets(e.ctx, Epoch.Add(90*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 3, n) // proj/old, proj/c, proj/d
	names, _, err = e.s.ListSecrets(e.ctx, Epoch, store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"proj/a"}, names)
}
