package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testGithubReplays: a delivery with the digest of an earlier one of its
// host (a forge's replay under a new delivery id) is stored as done,
// naming the first, and not added; replays racing each other and the
// first add one delivery between them.
func testGithubReplays(t *testing.T, open Opener) {
	e := setup(t, open)
	first := newDelivery("d1", Epoch)
	first.Digest = "digest-1"
	added, err := e.s.AddGithubDelivery(e.ctx, first)
	require.NoError(t, err)
	require.True(t, added)
	require.Empty(t, first.ReplayOf)

	replay := newDelivery("d2", Epoch.Add(time.Minute))
	replay.Digest = "digest-1"
	added, err = e.s.AddGithubDelivery(e.ctx, replay)
	require.NoError(t, err)
	require.False(t, added)
	require.Equal(t, "d1", replay.ReplayOf)
	got, err := e.s.GetGithubDelivery(e.ctx, "github.com", "d2")
	require.NoError(t, err)
	require.Equal(t, store.DeliveryDone, got.State)
	require.Equal(t, "d1", got.ReplayOf)
	require.Contains(t, got.Outcome, "d1")
	// Replayed again: still a replay of the first. Redelivered (same id):
	// nothing changes, and it is no replay.
	again := newDelivery("d3", Epoch)
	again.Digest = "digest-1"
	added, err = e.s.AddGithubDelivery(e.ctx, again)
	require.NoError(t, err)
	require.False(t, added)
	require.Equal(t, "d1", again.ReplayOf)
	re := newDelivery("d2", Epoch)
	re.Digest = "digest-1"
	added, err = e.s.AddGithubDelivery(e.ctx, re)
	require.NoError(t, err)
	require.False(t, added)
	require.Empty(t, re.ReplayOf)
	// Another forge's delivery with the same digest is its own.
	other := newDelivery("d1", Epoch)
	other.Host, other.Digest = "gitea.example.com", "digest-1"
	added, err = e.s.AddGithubDelivery(e.ctx, other)
	require.NoError(t, err)
	require.True(t, added)
	// Only the first is due, and the other forge's.
	hosts := map[string]bool{}
	for range 2 {
		d, err := e.s.ClaimGithubDelivery(e.ctx, Epoch.Add(time.Hour), Epoch.Add(2*time.Hour))
		require.NoError(t, err)
		require.Equal(t, "d1", d.DeliveryID)
		hosts[d.Host] = true
	}
	require.Equal(t, map[string]bool{"github.com": true, "gitea.example.com": true}, hosts)
	d, err := e.s.ClaimGithubDelivery(e.ctx, Epoch.Add(time.Hour), Epoch.Add(2*time.Hour))
	require.NoError(t, err)
	require.Nil(t, d)

	// Many replicas take the same body under different ids at once: one
	// is added, the others are its replays.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		addedBy []string
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newDelivery(fmt.Sprintf("race-%d", i), Epoch)
			r.Digest = "digest-race"
			ok, err := e.s.AddGithubDelivery(e.ctx, r)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				addedBy = append(addedBy, r.DeliveryID)
			} else if r.ReplayOf == "" {
				t.Errorf("%s neither added nor a replay", r.DeliveryID)
			}
		}()
	}
	wg.Wait()
	require.Len(t, addedBy, 1)
}

// testGithubFailedDeliveries: deliveries with an error are listed newest
// first, by host, a page at a time; those without are not.
func testGithubFailedDeliveries(t *testing.T, open Opener) {
	e := setup(t, open)
	for i := range 5 {
		d := newDelivery(fmt.Sprintf("d%d", i), Epoch.Add(time.Duration(i)*time.Minute))
		if i == 4 {
			d.Host = "gitea.example.com"
		}
		_, err := e.s.AddGithubDelivery(e.ctx, d)
		require.NoError(t, err)
	}
	for i := range 5 {
		d, err := e.s.ClaimGithubDelivery(e.ctx, Epoch.Add(time.Hour), Epoch.Add(2*time.Hour))
		require.NoError(t, err)
		p := store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID, Lease: Epoch.Add(2 * time.Hour), State: store.DeliveryDone, Outcome: "ok", Now: Epoch}
		switch i {
		case 1:
			p.State, p.Error = store.DeliveryFailed, "the forge answered 404"
		case 2, 4:
			p.Error = "the .taskcluster.yml does not render"
		}
		require.NoError(t, e.s.FinishGithubDelivery(e.ctx, p))
	}
	// d1 failed, d2 and d4 ended in an error for their users.
	all, next, err := e.s.ListFailedGithubDeliveries(e.ctx, "", store.Page{Limit: 2})
	require.NoError(t, err)
	require.NotEmpty(t, next)
	more, next, err := e.s.ListFailedGithubDeliveries(e.ctx, "", store.Page{Limit: 2, ContinuationToken: next})
	require.NoError(t, err)
	require.Empty(t, next)
	var ids []string
	for _, d := range append(all, more...) {
		ids = append(ids, d.DeliveryID)
	}
	require.Equal(t, []string{"d4", "d2", "d1"}, ids)
	require.Equal(t, store.DeliveryFailed, more[0].State)
	github, _, err := e.s.ListFailedGithubDeliveries(e.ctx, "github.com", store.Page{})
	require.NoError(t, err)
	require.Len(t, github, 2)
}

// testGithubDeliveryAttempts: a delivery's attempts, as Get and the list
// of failed deliveries show them, count every claim from the claim on:
// while it is held, after a retry, after a holder died, once finished; a
// replay, never claimed, shows none.
func testGithubDeliveryAttempts(t *testing.T, open Opener) {
	e := setup(t, open)
	first := newDelivery("d1", Epoch)
	first.Digest = "digest-1"
	_, err := e.s.AddGithubDelivery(e.ctx, first)
	require.NoError(t, err)
	replay := newDelivery("d2", Epoch)
	replay.Digest = "digest-1"
	_, err = e.s.AddGithubDelivery(e.ctx, replay)
	require.NoError(t, err)
	attempts := func(id string) int {
		t.Helper()
		d, err := e.s.GetGithubDelivery(e.ctx, "github.com", id)
		require.NoError(t, err)
		return d.Attempts
	}
	listed := func() map[string]int {
		t.Helper()
		list, _, err := e.s.ListFailedGithubDeliveries(e.ctx, "", store.Page{})
		require.NoError(t, err)
		out := map[string]int{}
		for _, d := range list {
			out[d.DeliveryID] = d.Attempts
		}
		return out
	}
	claim := func(at time.Time) *store.GithubDelivery {
		t.Helper()
		d, err := e.s.ClaimGithubDelivery(e.ctx, at, at.Add(time.Minute))
		require.NoError(t, err)
		require.NotNil(t, d)
		require.Equal(t, "d1", d.DeliveryID)
		return d
	}
	require.Zero(t, attempts("d1"))
	require.Zero(t, attempts("d2"), "a replay is never claimed")

	d := claim(Epoch)
	require.Equal(t, 1, d.Attempts)
	require.Equal(t, 1, attempts("d1"), "shown while it is held")
	require.NoError(t, e.s.RetryGithubDelivery(e.ctx, store.RetryGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: d.ClaimedUntil, Next: Epoch.Add(time.Hour), Error: "forge down"}))
	require.Equal(t, map[string]int{"d1": 1}, listed(), "listed with the error of its first attempt")

	d = claim(Epoch.Add(time.Hour)) // a holder that dies: its lease runs out
	require.Equal(t, 2, d.Attempts)
	require.Equal(t, map[string]int{"d1": 2}, listed(), "the attempt under way is counted")
	d = claim(Epoch.Add(2 * time.Hour))
	require.Equal(t, 3, d.Attempts)
	require.Equal(t, 3, attempts("d1"), "the dead holder's claim is counted")
	require.NoError(t, e.s.FinishGithubDelivery(e.ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: d.ClaimedUntil, State: store.DeliveryFailed, Error: "gave up", Now: Epoch.Add(2 * time.Hour)}))
	require.Equal(t, 3, attempts("d1"))
	require.Equal(t, map[string]int{"d1": 3}, listed())
	require.Zero(t, attempts("d2"))
}
