package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

func newDelivery(id string, at time.Time) *store.GithubDelivery {
	return &store.GithubDelivery{Host: "github.com", DeliveryID: id, Forge: "github", Event: "push", Body: []byte(`{"ref":"refs/heads/main"}`), Received: at}
}

func testGithubDeliveries(t *testing.T, open Opener) {
	e := setup(t, open)
	added, err := e.s.AddGithubDelivery(e.ctx, newDelivery("d1", Epoch))
	require.NoError(t, err)
	require.True(t, added)
	// A redelivery is stored once and changes nothing.
	again := newDelivery("d1", Epoch.Add(time.Minute))
	again.Body = []byte(`{}`)
	added, err = e.s.AddGithubDelivery(e.ctx, again)
	require.NoError(t, err)
	require.False(t, added)
	got, err := e.s.GetGithubDelivery(e.ctx, "github.com", "d1")
	require.NoError(t, err)
	require.Equal(t, `{"ref":"refs/heads/main"}`, string(got.Body))
	require.Equal(t, store.DeliveryPending, got.State)
	require.Equal(t, Epoch, got.Received)
	// The same id on another forge is another delivery.
	other := newDelivery("d1", Epoch)
	other.Host = "gitea.example.com"
	added, err = e.s.AddGithubDelivery(e.ctx, other)
	require.NoError(t, err)
	require.True(t, added)

	lease := Epoch.Add(time.Minute)
	d, err := e.s.ClaimGithubDelivery(e.ctx, Epoch, lease)
	require.NoError(t, err)
	require.NotNil(t, d)
	require.Equal(t, 1, d.Attempts)
	second, err := e.s.ClaimGithubDelivery(e.ctx, Epoch, lease)
	require.NoError(t, err)
	require.NotNil(t, second)
	require.NotEqual(t, d.Host, second.Host)
	none, err := e.s.ClaimGithubDelivery(e.ctx, Epoch, lease)
	require.NoError(t, err)
	require.Nil(t, none, "both are leased")

	// A retry makes it due again later; a lease that runs out does too.
	require.NoError(t, e.s.RetryGithubDelivery(e.ctx, store.RetryGithubDeliveryParams{Host: second.Host, DeliveryID: second.DeliveryID, Lease: lease, Next: Epoch.Add(time.Hour), Error: "forge down"}))
	none, err = e.s.ClaimGithubDelivery(e.ctx, Epoch.Add(2*time.Minute), Epoch.Add(3*time.Minute))
	require.NoError(t, err)
	require.Equal(t, d.Host, none.Host, "the expired lease makes the first due again")
	require.Equal(t, 2, none.Attempts)
	// The first lease is lost: finishing with it writes nothing.
	err = e.s.FinishGithubDelivery(e.ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID, Lease: lease,
		State: store.DeliveryDone, Now: Epoch, Builds: []store.GithubBuild{{TaskGroupID: "lost", Host: "github.com", State: "pending"}}})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	_, err = e.s.GetGithubBuild(e.ctx, "lost")
	require.ErrorIs(t, err, store.ErrNotFound)
	// With the current lease it records the builds and the outbox together.
	build := store.GithubBuild{TaskGroupID: "tg1", Host: "github.com", Organization: "o", Repository: "r", SHA: "abc", State: "pending",
		EventType: "push", EventID: "d1", InstallationID: 7, Created: Epoch, Updated: Epoch}
	status := store.GithubOutboxEntry{Host: "github.com", Key: "status:tg1", Kind: "status", Replace: true, Owner: "o", Repo: "r", Target: "abc", Body: []byte(`{"state":"pending"}`)}
	require.NoError(t, e.s.FinishGithubDelivery(e.ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: Epoch.Add(3 * time.Minute), State: store.DeliveryDone, Outcome: "1 task", Now: Epoch,
		Builds: []store.GithubBuild{build}, Outbox: []store.GithubOutboxEntry{status}}))
	got, err = e.s.GetGithubDelivery(e.ctx, d.Host, d.DeliveryID)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryDone, got.State)
	require.Equal(t, "1 task", got.Outcome)
	b, err := e.s.GetGithubBuild(e.ctx, "tg1")
	require.NoError(t, err)
	require.Equal(t, build, *b)
	queued, err := e.s.GetGithubOutbox(e.ctx, "github.com", "status:tg1")
	require.NoError(t, err)
	require.Equal(t, `{"state":"pending"}`, string(queued.Body))
	// A done delivery is never claimed again.
	none, err = e.s.ClaimGithubDelivery(e.ctx, Epoch.Add(24*time.Hour), Epoch.Add(25*time.Hour))
	require.NoError(t, err)
	require.Equal(t, second.Host, none.Host, "the one retried later is")

	// Installations.
	require.NoError(t, e.s.PutGithubInstallation(e.ctx, "github.com", "octo", 42))
	require.NoError(t, e.s.PutGithubInstallation(e.ctx, "github.com", "octo", 43))
	id, err := e.s.GetGithubInstallation(e.ctx, "github.com", "octo")
	require.NoError(t, err)
	require.EqualValues(t, 43, id)
	require.NoError(t, e.s.PutGithubInstallation(e.ctx, "github.com", "octo", 0))
	id, err = e.s.GetGithubInstallation(e.ctx, "github.com", "octo")
	require.NoError(t, err)
	require.Zero(t, id)
}

// testGithubDeliveryClaimRace has replicas claim at once: each delivery
// goes to exactly one of them.
func testGithubDeliveryClaimRace(t *testing.T, open Opener) {
	e := setup(t, open)
	const n = 20
	for i := range n {
		_, err := e.s.AddGithubDelivery(e.ctx, newDelivery(fmt.Sprintf("d%02d", i), Epoch))
		require.NoError(t, err)
	}
	var (
		mu  sync.Mutex
		got = map[string]int{}
		wg  sync.WaitGroup
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d, err := e.s.ClaimGithubDelivery(e.ctx, Epoch, Epoch.Add(time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				if d == nil {
					return
				}
				mu.Lock()
				got[d.DeliveryID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, got, n)
	for id, c := range got {
		require.Equal(t, 1, c, id)
	}
}

func testGithubBuilds(t *testing.T, open Opener) {
	e := setup(t, open)
	var builds []store.GithubBuild
	for i := range 5 {
		b := store.GithubBuild{TaskGroupID: fmt.Sprintf("tg%d", i), Host: "github.com", Organization: "o", Repository: "r",
			SHA: fmt.Sprintf("sha%d", i%2), State: "pending", EventType: "push", EventID: "d", PullRequestNumber: i % 3,
			Created: Epoch, Updated: Epoch}
		if i == 4 {
			b.Repository = "other"
		}
		builds = append(builds, b)
	}
	_, err := e.s.AddGithubDelivery(e.ctx, newDelivery("d", Epoch))
	require.NoError(t, err)
	d, err := e.s.ClaimGithubDelivery(e.ctx, Epoch, Epoch.Add(time.Minute))
	require.NoError(t, err)
	require.NoError(t, e.s.FinishGithubDelivery(e.ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: Epoch.Add(time.Minute), State: store.DeliveryDone, Now: Epoch, Builds: builds}))

	all, next, err := e.s.ListGithubBuilds(e.ctx, store.GithubBuildFilter{}, store.Page{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []string{"tg4", "tg3", "tg2"}, groupIDs(all))
	rest, next, err := e.s.ListGithubBuilds(e.ctx, store.GithubBuildFilter{}, store.Page{Limit: 3, ContinuationToken: next})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, []string{"tg1", "tg0"}, groupIDs(rest))
	some, _, err := e.s.ListGithubBuilds(e.ctx, store.GithubBuildFilter{Organization: "o", Repository: "r", SHA: "sha1"}, store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"tg3", "tg1"}, groupIDs(some))
	some, _, err = e.s.ListGithubBuilds(e.ctx, store.GithubBuildFilter{Repository: "r", PullRequestNumber: 1}, store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"tg1"}, groupIDs(some))

	// A build moves only from the states given, and its status is queued
	// in the same transaction.
	status := &store.GithubOutboxEntry{Host: "github.com", Key: "status:tg0", Kind: "status", Replace: true, Body: []byte(`{"state":"failure"}`)}
	moved, err := e.s.AdvanceGithubBuild(e.ctx, store.AdvanceGithubBuildParams{TaskGroupID: "tg0", From: []string{"pending"}, State: "failure", Now: Epoch.Add(time.Minute), Status: status})
	require.NoError(t, err)
	require.True(t, moved)
	late := &store.GithubOutboxEntry{Host: "github.com", Key: "status:tg0", Kind: "status", Replace: true, Body: []byte(`{"state":"success"}`)}
	moved, err = e.s.AdvanceGithubBuild(e.ctx, store.AdvanceGithubBuildParams{TaskGroupID: "tg0", From: []string{"pending"}, State: "success", Now: Epoch.Add(2 * time.Minute), Status: late})
	require.NoError(t, err)
	require.False(t, moved, "failure does not move back")
	b, err := e.s.GetGithubBuild(e.ctx, "tg0")
	require.NoError(t, err)
	require.Equal(t, "failure", b.State)
	require.Equal(t, Epoch.Add(time.Minute), b.Updated)
	queued, err := e.s.GetGithubOutbox(e.ctx, "github.com", "status:tg0")
	require.NoError(t, err)
	require.Equal(t, `{"state":"failure"}`, string(queued.Body))
	pending, _, err := e.s.ListGithubBuilds(e.ctx, store.GithubBuildFilter{State: "pending"}, store.Page{})
	require.NoError(t, err)
	require.Len(t, pending, 4)
}

func groupIDs(bs []store.GithubBuild) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.TaskGroupID
	}
	return out
}

// claimSends claims the forge's due messages at now, read as entries.
func (e *env) claimSends(now time.Time) ([]store.OutboxMessage, []store.GithubOutboxEntry) {
	e.t.Helper()
	msgs, err := e.s.ClaimOutbox(e.ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubSend,
		Owner: "sender", Now: now, Lease: time.Minute, Limit: 10})
	require.NoError(e.t, err)
	var entries []store.GithubOutboxEntry
	for i := range msgs {
		entry, err := store.GithubOutboxEntryOf(&msgs[i])
		require.NoError(e.t, err)
		entries = append(entries, entry)
	}
	return msgs, entries
}

// finishSend records the outcome of a claimed forge message at now.
func (e *env) finishSend(m *store.OutboxMessage, o store.OutboxOutcome) {
	e.t.Helper()
	ok, err := e.s.FinishOutbox(e.ctx, m, o)
	require.NoError(e.t, err)
	require.True(e.t, ok)
}

// testGithubOutbox: the forge's statuses and comments are messages of
// the outbox (kind GithubSend): an exact duplicate comment is queued
// once, even after it was sent; a status queued again replaces its body,
// and a newer body queued while the older is being sent is sent next.
func testGithubOutbox(t *testing.T, open Opener) {
	e := setup(t, open)
	comment := store.GithubOutboxEntry{Host: "h", Key: "comment:x", Kind: "comment", Owner: "o", Repo: "r", Target: "3", Body: []byte(`{"body":"hi"}`), NextAttempt: Epoch}
	status := store.GithubOutboxEntry{Host: "h", Key: "status:g", Kind: "status", Replace: true, Owner: "o", Repo: "r", Target: "sha",
		Body: []byte(`{"state":"pending"}`), NextAttempt: Epoch.Add(time.Second)}
	require.NoError(t, e.s.QueueGithubOutbox(e.ctx, []store.GithubOutboxEntry{comment, status}, Epoch))
	// An exact duplicate comment is not queued again.
	require.NoError(t, e.s.QueueGithubOutbox(e.ctx, []store.GithubOutboxEntry{comment}, Epoch))

	msgs, claimed := e.claimSends(Epoch.Add(time.Second))
	require.Len(t, claimed, 2)
	require.Equal(t, "comment:x", claimed[0].Key)
	require.Equal(t, []string{"h", "comment", "o", "r", "3", `{"body":"hi"}`},
		[]string{claimed[0].Host, claimed[0].Kind, claimed[0].Owner, claimed[0].Repo, claimed[0].Target, string(claimed[0].Body)})
	_, again := e.claimSends(Epoch.Add(time.Second))
	require.Empty(t, again, "leased")

	// The comment is sent; the status fails and is retried later, and a
	// newer state queued meanwhile wins over the claimed one.
	e.finishSend(&msgs[0], store.OutboxOutcome{Done: true, Now: Epoch.Add(time.Second)})
	newer := status
	newer.Body, newer.NextAttempt = []byte(`{"state":"success"}`), Epoch.Add(2*time.Second)
	require.NoError(t, e.s.QueueGithubOutbox(e.ctx, []store.GithubOutboxEntry{newer}, Epoch.Add(time.Second)))
	e.finishSend(&msgs[1], store.OutboxOutcome{Done: true, Now: Epoch.Add(time.Second)})
	got, err := e.s.GetGithubOutbox(e.ctx, "h", "status:g")
	require.NoError(t, err)
	require.Equal(t, "pending", got.State, "the newer body is still to send")
	require.EqualValues(t, 2, got.Seq)
	msgs, claimed = e.claimSends(Epoch.Add(2 * time.Second))
	require.Len(t, claimed, 1)
	require.Equal(t, `{"state":"success"}`, string(claimed[0].Body))
	e.finishSend(&msgs[0], store.OutboxOutcome{Now: Epoch.Add(2 * time.Second), Next: Epoch.Add(time.Hour), Error: "502"})
	_, none := e.claimSends(Epoch.Add(time.Minute))
	require.Empty(t, none, "backing off")
	msgs, claimed = e.claimSends(Epoch.Add(time.Hour))
	require.Len(t, claimed, 1)
	require.Equal(t, "502", claimed[0].LastError)
	e.finishSend(&msgs[0], store.OutboxOutcome{Done: true, Now: Epoch.Add(time.Hour)})
	got, err = e.s.GetGithubOutbox(e.ctx, "h", "status:g")
	require.NoError(t, err)
	require.Equal(t, "sent", got.State)
	c, err := e.s.GetGithubOutbox(e.ctx, "h", "comment:x")
	require.NoError(t, err)
	require.Equal(t, "sent", c.State)
	require.EqualValues(t, 1, c.Seq)
	// A sent comment queued again is not sent again.
	require.NoError(t, e.s.QueueGithubOutbox(e.ctx, []store.GithubOutboxEntry{comment}, Epoch.Add(time.Hour)))
	_, none = e.claimSends(Epoch.Add(2 * time.Hour))
	require.Empty(t, none, "the comment was posted once")
}

// testGithubExpiry: processed deliveries and sent messages go after
// GithubRetention; pending ones stay.
func testGithubExpiry(t *testing.T, open Opener) {
	e := setup(t, open)
	for _, id := range []string{"done", "pending"} {
		_, err := e.s.AddGithubDelivery(e.ctx, newDelivery(id, Epoch))
		require.NoError(t, err)
	}
	d, err := e.s.ClaimGithubDelivery(e.ctx, Epoch, Epoch.Add(time.Minute))
	require.NoError(t, err)
	require.NoError(t, e.s.FinishGithubDelivery(e.ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: Epoch.Add(time.Minute), State: store.DeliveryDone, Now: Epoch}))
	n, err := e.s.ExpireGithubRecords(e.ctx, Epoch.Add(store.GithubRetention-time.Hour))
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = e.s.ExpireGithubRecords(e.ctx, Epoch.Add(store.GithubRetention+time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = e.s.GetGithubDelivery(e.ctx, "github.com", d.DeliveryID)
	require.ErrorIs(t, err, store.ErrNotFound)
	other := "pending"
	if d.DeliveryID == "pending" {
		other = "done"
	}
	_, err = e.s.GetGithubDelivery(e.ctx, "github.com", other)
	require.NoError(t, err)
}
