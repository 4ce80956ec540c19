package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testLoginOAuth: a third-party code is taken once (even by racing
// exchanges), never after it expired; an access token is found until it
// expires; the expirer deletes both once expired.
func testLoginOAuth(t *testing.T, open Opener) {
	e := setup(t, open)
	code := store.OAuthGrant{Hash: "c1", ClientID: "treeherder", RedirectURI: "https://th.example/cb", Provider: "gitea",
		Identity: "gitea/1|alice", Roles: []string{"gitea-team:acme/a"}, Scopes: []string{"queue:rerun-task:*"}, Challenge: "ch",
		GrantExpires: Epoch.Add(24 * time.Hour).UTC(), Expires: Epoch.Add(10 * time.Minute).UTC()}
	require.NoError(t, e.s.CreateOAuthCode(e.ctx, code))
	require.Error(t, e.s.CreateOAuthCode(e.ctx, code), "a code is recorded once")
	none := func(store.OAuthGrant) *store.OAuthGrant { return nil }
	_, err := e.s.ExchangeOAuthCode(e.ctx, "other", Epoch, none)
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := e.s.ExchangeOAuthCode(e.ctx, "c1", Epoch, none)
	require.NoError(t, err)
	require.Equal(t, code, *got)
	_, err = e.s.ExchangeOAuthCode(e.ctx, "c1", Epoch, none)
	require.ErrorIs(t, err, store.ErrNotFound, "a code is used once, also when it gave no token")

	late := code
	late.Hash = "c2"
	require.NoError(t, e.s.CreateOAuthCode(e.ctx, late))
	traded := false
	_, err = e.s.ExchangeOAuthCode(e.ctx, "c2", Epoch.Add(11*time.Minute), func(store.OAuthGrant) *store.OAuthGrant { traded = true; return nil })
	require.ErrorIs(t, err, store.ErrNotFound, "an expired code is refused")
	require.False(t, traded, "an expired code is not traded")

	race := code
	race.Hash = "c3"
	require.NoError(t, e.s.CreateOAuthCode(e.ctx, race))
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.s.ExchangeOAuthCode(e.ctx, "c3", Epoch, none); err == nil {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, taken)

	tok := store.OAuthGrant{Hash: "t1", ClientID: "treeherder", Provider: "gitea", Identity: "gitea/1|alice",
		Roles: []string{}, Scopes: []string{"queue:rerun-task:*"}, Expires: Epoch.Add(time.Hour).UTC()}
	forToken := code
	forToken.Hash = "c5"
	require.NoError(t, e.s.CreateOAuthCode(e.ctx, forToken))
	got, err = e.s.ExchangeOAuthCode(e.ctx, "c5", Epoch, func(g store.OAuthGrant) *store.OAuthGrant {
		require.Equal(t, "c5", g.Hash)
		return &tok
	})
	require.NoError(t, err)
	require.Equal(t, "treeherder", got.ClientID)
	gotTok, err := e.s.GetOAuthToken(e.ctx, "t1", Epoch)
	require.NoError(t, err)
	require.Equal(t, tok.Scopes, gotTok.Scopes)
	require.Equal(t, tok.Identity, gotTok.Identity)
	require.Equal(t, tok.Expires, gotTok.Expires)
	_, err = e.s.GetOAuthToken(e.ctx, "t2", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.s.GetOAuthToken(e.ctx, "t1", Epoch.Add(2*time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "an expired token is refused")

	// Two hours on, the untaken code c4 (ten minutes) and t1 (an hour)
	// have expired.
	left := code
	left.Hash = "c4"
	require.NoError(t, e.s.CreateOAuthCode(e.ctx, left))
	n, err := e.s.ExpireLogin(e.ctx, Epoch.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = e.s.GetOAuthToken(e.ctx, "t1", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound, "the expirer deleted the token")
}
