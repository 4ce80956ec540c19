package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testLoginAttempts: a sign-in is taken once, never after it expired, and
// two callbacks racing with one state get it once between them.
func testLoginAttempts(t *testing.T, open Opener) {
	e := setup(t, open)
	a := store.LoginAttempt{StateHash: "h1", Provider: "gitea", Nonce: "n", Verifier: "v", ReturnTo: "/ui/", Expires: Epoch.Add(10 * time.Minute)}
	require.NoError(t, e.s.CreateLoginAttempt(e.ctx, a))
	require.Error(t, e.s.CreateLoginAttempt(e.ctx, a), "a state is recorded once")

	_, err := e.s.TakeLoginAttempt(e.ctx, "other", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := e.s.TakeLoginAttempt(e.ctx, "h1", Epoch)
	require.NoError(t, err)
	require.Equal(t, a, *got)
	_, err = e.s.TakeLoginAttempt(e.ctx, "h1", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound, "a state is used once")

	late := a
	late.StateHash = "h2"
	require.NoError(t, e.s.CreateLoginAttempt(e.ctx, late))
	_, err = e.s.TakeLoginAttempt(e.ctx, "h2", Epoch.Add(11*time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound, "an expired sign-in is refused")

	race := a
	race.StateHash = "h3"
	require.NoError(t, e.s.CreateLoginAttempt(e.ctx, race))
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.s.TakeLoginAttempt(e.ctx, "h3", Epoch); err == nil {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, taken)
}

// testLoginSessions: a session is found until it expires or ends, and the
// expirer deletes expired sign-ins and sessions only.
func testLoginSessions(t *testing.T, open Opener) {
	e := setup(t, open)
	s := store.LoginSession{IDHash: "s1", Provider: "gitea", Identity: "gitea/1|alice", Roles: []string{"gitea-team:org/a", "gitea-org:org"},
		Created: Epoch, Expires: Epoch.Add(time.Hour)}
	require.NoError(t, e.s.CreateLoginSession(e.ctx, s))
	got, err := e.s.GetLoginSession(e.ctx, "s1", Epoch.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, s, *got)
	_, err = e.s.GetLoginSession(e.ctx, "s1", Epoch.Add(2*time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "an expired session is gone")

	none := store.LoginSession{IDHash: "s2", Provider: "oidc", Identity: "oidc/bob", Created: Epoch, Expires: Epoch.Add(3 * time.Hour)}
	require.NoError(t, e.s.CreateLoginSession(e.ctx, none))
	got, err = e.s.GetLoginSession(e.ctx, "s2", Epoch)
	require.NoError(t, err)
	require.Empty(t, got.Roles)
	require.NoError(t, e.s.DeleteLoginSession(e.ctx, "s2"))
	require.NoError(t, e.s.DeleteLoginSession(e.ctx, "s2"))
	_, err = e.s.GetLoginSession(e.ctx, "s2", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, e.s.CreateLoginAttempt(e.ctx, store.LoginAttempt{StateHash: "a1", Provider: "gitea", Expires: Epoch.Add(time.Minute)}))
	require.NoError(t, e.s.CreateLoginAttempt(e.ctx, store.LoginAttempt{StateHash: "a2", Provider: "gitea", Expires: Epoch.Add(3 * time.Hour)}))
	n, err := e.s.ExpireLogin(e.ctx, Epoch.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, n, "one sign-in and one session expired")
	_, err = e.s.TakeLoginAttempt(e.ctx, "a2", Epoch.Add(2*time.Hour))
	require.NoError(t, err)
}
