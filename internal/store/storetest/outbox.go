package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func forgeTask(t *queue.Task) { t.SchedulerID = github.SchedulerID }

// claimGroups claims the forge reporter's due group messages at now.
func (e *env) claimGroups(owner string, now time.Time, lease time.Duration) []store.OutboxMessage {
	e.t.Helper()
	got, err := e.s.ClaimOutbox(e.ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubGroupChanged,
		Owner: owner, Now: now, Lease: lease, Limit: 10})
	require.NoError(e.t, err)
	return got
}

func outboxKeys(msgs []store.OutboxMessage) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.Key)
	}
	return out
}

// testOutbox: a change of a forge build's task queues one message for its
// group in the change's transaction (another task's change queues none);
// a claim leases it to one holder until its lease ends, renewal moves the
// end, a finish counts only while the claim is the holder's, a change
// while it is held leaves it due again after the finish, a failure is due
// again at its back-off, and the service's expiry deletes it.
func testOutbox(t *testing.T, open Opener) {
	e := setup(t, open)
	const lease = 30 * time.Second
	e.create("plainTaskAAAAAAAAAAAAA", Epoch)
	e.create("forgeTaskAAAAAAAAAAAAA", Epoch, forgeTask)
	e.create("forgeTaskBBBBBBBBBBBBB", Epoch, forgeTask, withGroup("forgeTaskAAAAAAAAAAAAA"))
	require.Empty(t, e.claimGroups("a", Epoch.Add(-time.Second), lease), "due from the change's time")

	now := Epoch.Add(time.Second)
	a := e.claimGroups("a", now, lease)
	require.Equal(t, []string{"forgeTaskAAAAAAAAAAAAA"}, outboxKeys(a), "one message a group, none for other tasks")
	require.Equal(t, 1, a[0].Attempts)
	require.Empty(t, e.claimGroups("b", now, lease), "leased")

	// Renewed, the lease outlasts its first end; a claim that ran out is
	// another's, and the first holder can neither renew nor finish it.
	held, err := e.s.RenewOutbox(e.ctx, a, now.Add(2*lease))
	require.NoError(t, err)
	require.Equal(t, 1, held)
	require.Empty(t, e.claimGroups("b", now.Add(lease+time.Second), lease), "renewed")
	b := e.claimGroups("b", now.Add(2*lease), lease)
	require.Equal(t, []string{"forgeTaskAAAAAAAAAAAAA"}, outboxKeys(b))
	require.Equal(t, 2, b[0].Attempts)
	held, err = e.s.RenewOutbox(e.ctx, a, now.Add(3*lease))
	require.NoError(t, err)
	require.Zero(t, held, "the first claim is lost")
	ok, err := e.s.FinishOutbox(e.ctx, &a[0], store.OutboxOutcome{Done: true, Now: now.Add(2 * lease)})
	require.NoError(t, err)
	require.False(t, ok)

	// A change while b holds it: b's finish leaves it due at once.
	now = now.Add(2 * lease)
	e.claim("forgeTaskBBBBBBBBBBBBB", now)
	ok, err = e.s.FinishOutbox(e.ctx, &b[0], store.OutboxOutcome{Done: true, Now: now})
	require.NoError(t, err)
	require.True(t, ok)
	c := e.claimGroups("c", now, lease)
	require.Equal(t, []string{"forgeTaskAAAAAAAAAAAAA"}, outboxKeys(c), "changed since b claimed it")

	// A failure is due again at its next attempt; done, it is not due.
	ok, err = e.s.FinishOutbox(e.ctx, &c[0], store.OutboxOutcome{Error: "no answer", Next: now.Add(time.Minute), Now: now})
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, e.claimGroups("d", now.Add(59*time.Second), lease))
	d := e.claimGroups("d", now.Add(time.Minute), lease)
	require.Len(t, d, 1)
	require.Equal(t, "no answer", d[0].LastError)
	ok, err = e.s.FinishOutbox(e.ctx, &d[0], store.OutboxOutcome{Done: true, Now: now.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, e.claimGroups("d", now.Add(time.Hour), lease))

	// Recording a build looks at its group again.
	delivery := newDelivery("d1", now)
	_, err = e.s.AddGithubDelivery(e.ctx, delivery)
	require.NoError(t, err)
	claimed, err := e.s.ClaimGithubDelivery(e.ctx, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.NoError(t, e.s.FinishGithubDelivery(e.ctx, store.FinishGithubDeliveryParams{Host: delivery.Host, DeliveryID: delivery.DeliveryID,
		Lease: claimed.ClaimedUntil, State: store.DeliveryDone, Now: now,
		Builds: []store.GithubBuild{{TaskGroupID: "forgeTaskAAAAAAAAAAAAA", Host: "github.com", State: github.StatePending, Created: now, Updated: now}}}))
	require.Equal(t, []string{"forgeTaskAAAAAAAAAAAAA"}, outboxKeys(e.claimGroups("e", now, lease)))

	// The service's expiry deletes its messages past their expiry.
	_, err = e.s.ExpireGithubRecords(e.ctx, now.Add(store.GithubRetention+time.Hour))
	require.NoError(t, err)
	require.Empty(t, e.claimGroups("f", now.Add(store.GithubRetention+2*time.Hour), lease))
}

// testOutboxClaimRace: claimers racing over many due messages each claim
// every message once.
func testOutboxClaimRace(t *testing.T, open Opener) {
	e := setup(t, open)
	const groups, claimers = 40, 6
	for i := range groups {
		e.create(taskIDFor(i), Epoch, forgeTask)
	}
	now := Epoch.Add(time.Second)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			for {
				got, err := e.s.ClaimOutbox(e.ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubGroupChanged,
					Owner: string(rune('a' + i)), Now: now, Lease: time.Minute, Limit: 3})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				for j := range got {
					ok, err := e.s.FinishOutbox(e.ctx, &got[j], store.OutboxOutcome{Done: true, Now: now})
					if err != nil || !ok {
						t.Errorf("finishing %s: %v %v", got[j].Key, ok, err)
					}
					mu.Lock()
					seen[got[j].Key]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, groups)
	for k, n := range seen {
		require.Equal(t, 1, n, "group %s claimed %d times", k, n)
	}
}

// taskIDFor is a distinct valid taskId for i.
func taskIDFor(i int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	return "outboxTask" + string(letters[i/52%52]) + string(letters[i%52]) + "AAAAAAAAAA"
}
