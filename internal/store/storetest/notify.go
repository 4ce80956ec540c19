package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// notificationRef is what the notify tests compare of an outbox row.
type notificationRef struct {
	Event, Channel, Target, State string
	RunID                         int
}

func (e *env) notifications(taskID string) []notificationRef {
	e.t.Helper()
	list, _, err := e.s.ListTaskNotifications(e.ctx, taskID, store.Page{})
	require.NoError(e.t, err)
	out := []notificationRef{}
	for _, n := range list {
		out = append(out, notificationRef{n.Event, n.Channel, n.Target, n.State, n.RunID})
		require.Equal(e.t, taskID, n.TaskID)
	}
	return out
}

func claimParams(owner string, now time.Time, limit int) store.ClaimNotificationsParams {
	return store.ClaimNotificationsParams{Owner: owner, Now: now, Lease: notify.Lease, Limit: limit,
		RateLimit: notify.RateLimitCount, RateWindow: notify.RateLimitWindow}
}

// testNotifyOutbox: each transition of a task with notify routes records,
// in its own transaction, one notification per route that fires (on every
// path a transition takes: create, claimWork, claimTask, reports, rerun,
// cancel); malformed routes are recorded refused with the reason; a
// cancelled task notifies nobody; a task without notify routes records
// nothing; a transition rolled back records nothing.
func testNotifyOutbox(t *testing.T, open Opener) {
	e := setup(t, open)
	routes := withRoutes("index.x.y", "notify.email.dev@example.com.on-failed", "notify.webhook.ci.on-transition",
		"notify.pulse.builds.on-any", "notify.email.nobody.on-resolved", "notify.matrix-room.!r:x.org.on-running")
	e.create("n1", Epoch, routes)
	require.Equal(t, []notificationRef{
		{queue.EventTaskDefined, notify.ChannelWebhook, "ci", notify.StatePending, -1},
		{queue.EventTaskPending, notify.ChannelWebhook, "ci", notify.StatePending, 0},
	}, e.notifications("n1"))
	e.claimWork(testQueue, 1, Epoch)
	e.mustApply("n1", Epoch.Add(time.Second), report(queue.StateFailed, 0, Epoch.Add(time.Second)))
	got := e.notifications("n1")
	require.Equal(t, []notificationRef{
		{queue.EventTaskRunning, notify.ChannelWebhook, "ci", notify.StatePending, 0},
		{queue.EventTaskRunning, notify.ChannelMatrix, "!r:x.org", notify.StatePending, 0},
		{queue.EventTaskFailed, notify.ChannelEmail, "dev@example.com", notify.StatePending, 0},
		{queue.EventTaskFailed, notify.ChannelWebhook, "ci", notify.StatePending, 0},
		{queue.EventTaskFailed, notify.ChannelPulse, "builds", notify.StatePending, 0},
		{queue.EventTaskFailed, notify.ChannelEmail, "nobody", notify.StateRefused, 0},
	}, got[2:])
	list, _, err := e.s.ListTaskNotifications(e.ctx, "n1", store.Page{})
	require.NoError(t, err)
	refused := list[len(list)-1]
	require.Contains(t, refused.Error, "not a plain email address")
	require.Equal(t, Epoch.Add(time.Second), refused.Created, "recorded at the transition's time")
	require.Equal(t, Epoch, list[0].Created)
	var st queue.Status
	require.NoError(t, json.Unmarshal(list[len(list)-2].Status, &st), "the status the event announced is kept")
	require.Equal(t, queue.StateFailed, st.State)

	// A rerun is pending again; claimTask runs it.
	e.mustApply("n1", Epoch.Add(2*time.Second), rerun(Epoch.Add(2*time.Second)))
	e.claim("n1", Epoch.Add(3*time.Second))
	require.Len(t, e.notifications("n1"), 11)

	// Cancelled: an exception nobody is told of.
	e.mustApply("n1", Epoch.Add(4*time.Second), cancel(Epoch.Add(4*time.Second)))
	require.Len(t, e.notifications("n1"), 11)

	// No notify route, no notification.
	e.bring("plain", queue.StateFailed, withRoutes("index.a.b"))
	require.Empty(t, e.notifications("plain"))

	// A transition that fails records nothing.
	e.create("n2", Epoch, withRoutes("notify.email.a@b.org.on-transition"))
	_, err = e.apply("n2", Epoch, func(ts *queue.TaskState, tr *queue.Transition) error {
		if err := ts.Claim(0, workerGroup, workerID, Epoch, Epoch.Add(claimTimeout), tr); err != nil {
			return err
		}
		return fmt.Errorf("rolled back")
	})
	require.Error(t, err)
	require.Len(t, e.notifications("n2"), 2, "defined and pending only")

	// Deadline exceeded notifies nobody either; a claim expired does.
	e.create("n3", Epoch, withRoutes("notify.email.a@b.org.on-exception"), withRetries(0))
	e.claim("n3", Epoch)
	res, err := e.s.ExpireClaims(e.ctx, Epoch.Add(claimTimeout+time.Second), 10)
	require.NoError(t, err)
	require.NotEmpty(t, res.Changes)
	require.Equal(t, []notificationRef{{queue.EventTaskException, notify.ChannelEmail, "a@b.org", notify.StatePending, 0}}, e.notifications("n3"))
}

// testNotifyClaims: claims lease due notifications to one sender, a lost
// lease refuses the outcome, a retry waits for its time, a duplicate API
// request within the window is not stored, and the denylist and the
// per-address rate limit are applied at claim time.
func testNotifyClaims(t *testing.T, open Opener) {
	e := setup(t, open)
	notifyOrder(t, e)
	notifyLeases(t, e)
	notifyDenylist(t, e)
	notifyRateLimit(t, e)
	// Expiry removes the rows of expired tasks.
	e.create("gone", Epoch, withRoutes("notify.email.a@b.org.on-defined"))
	n, err := e.s.ExpireNotifications(e.ctx, Epoch.Add(49*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// mail is an email notification.
func mail(to, subject string) *notify.Message {
	return &notify.Message{Email: &notify.Email{Address: to, Subject: subject, Content: "hi"}}
}

// notifyOrder: notifications due at once are claimed oldest first,
// whatever the batch; all sent, no message is left to claim.
func notifyOrder(t *testing.T, e *env) {
	var queued, claimed []string
	for i := range 20 {
		id, _, err := e.s.EnqueueNotification(e.ctx, mail("order@x.org", fmt.Sprint(i)), Epoch)
		require.NoError(t, err)
		queued = append(queued, id)
	}
	for {
		got, err := e.s.ClaimNotifications(e.ctx, claimParams("s0", Epoch, 7))
		require.NoError(t, err)
		if len(got) == 0 {
			break
		}
		for _, n := range got {
			claimed = append(claimed, n.ID)
			ok, err := e.s.FinishNotification(e.ctx, &n, notify.Outcome{State: notify.StateSent}, Epoch)
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	require.Equal(t, queued, claimed)
	left, err := e.s.ClaimOutbox(e.ctx, store.ClaimOutboxParams{Service: store.NotifyService, Kind: store.NotifySend, Owner: "x",
		Now: Epoch.Add(time.Hour), Lease: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, left)
	_, err = e.s.ExpireNotifications(e.ctx, Epoch.Add(8*24*time.Hour))
	require.NoError(t, err)
}

// notifyLeases: a duplicate request within the window is not stored;
// claims lease due notifications to one sender, a lost lease refuses the
// outcome, and a retry waits for its time.
func notifyLeases(t *testing.T, e *env) {
	ctx := e.ctx
	id1, dup, err := e.s.EnqueueNotification(ctx, mail("a@x.org", "one"), Epoch)
	require.NoError(t, err)
	require.False(t, dup)
	_, dup, err = e.s.EnqueueNotification(ctx, mail("a@x.org", "one"), Epoch.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, dup, "the same request within the window is a duplicate")
	_, dup, err = e.s.EnqueueNotification(ctx, mail("a@x.org", "one"), Epoch.Add(notify.DuplicateWindow+time.Second))
	require.NoError(t, err)
	require.False(t, dup)

	got, err := e.s.ClaimNotifications(ctx, claimParams("s1", Epoch, 1))
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, id1, got[0].ID)
	require.Equal(t, 1, got[0].Attempts)
	one, err := e.s.GetNotification(ctx, id1)
	require.NoError(t, err)
	require.Equal(t, notify.StatePending, one.State)
	require.Equal(t, "a@x.org", one.Target)
	_, err = e.s.GetNotification(ctx, "no-such-id")
	require.ErrorIs(t, err, store.ErrNotFound)
	var m notify.Message
	require.NoError(t, json.Unmarshal(got[0].Message, &m))
	require.Equal(t, "one", m.Email.Subject)

	// Leased: nobody else gets it until the lease ends.
	other, err := e.s.ClaimNotifications(ctx, claimParams("s2", Epoch.Add(notify.Lease/2), 10))
	require.NoError(t, err)
	require.Len(t, other, 1)
	require.NotEqual(t, id1, other[0].ID)
	again, err := e.s.ClaimNotifications(ctx, claimParams("s2", Epoch.Add(notify.Lease+time.Second), 10))
	require.NoError(t, err)
	require.Len(t, again, 1, "s1's lease ran out")
	require.Equal(t, id1, again[0].ID)
	require.Equal(t, 2, again[0].Attempts)
	ok, err := e.s.FinishNotification(ctx, &got[0], notify.Outcome{State: notify.StateSent}, Epoch.Add(notify.Lease+2*time.Second))
	require.NoError(t, err)
	require.False(t, ok, "a lost lease records nothing")
	ok, err = e.s.FinishNotification(ctx, &again[0], notify.AfterAttempt(fmt.Errorf("421 try later"), 2, Epoch.Add(notify.Lease), 0.5), Epoch.Add(notify.Lease))
	require.NoError(t, err)
	require.True(t, ok)
	retryAt := Epoch.Add(notify.Lease).Add(notify.Backoff(2, 0.5))
	// s2 renews its lease while it sends (s1's is gone: it renews none).
	lost := got[0]
	lost.ID = other[0].ID // s1 never claimed this one
	held, err := e.s.RenewNotifications(ctx, []store.Notification{got[0], lost}, retryAt.Add(notify.Lease))
	require.NoError(t, err)
	require.Zero(t, held)
	held, err = e.s.RenewNotifications(ctx, []store.Notification{other[0]}, retryAt.Add(notify.Lease))
	require.NoError(t, err)
	require.Equal(t, 1, held)
	renewed, err := e.s.GetNotification(ctx, other[0].ID)
	require.NoError(t, err)
	require.Equal(t, retryAt.Add(notify.Lease), renewed.NextAttempt, "a leased notification is due when its lease ends")
	require.Equal(t, "s2", renewed.LeaseOwner)
	retrying, err := e.s.GetNotification(ctx, id1)
	require.NoError(t, err)
	require.Equal(t, notify.StatePending, retrying.State)
	require.Equal(t, retryAt, retrying.NextAttempt, "the retry's time")
	require.Equal(t, 2, retrying.Attempts)
	require.Empty(t, retrying.LeaseOwner)
	none, err := e.s.ClaimNotifications(ctx, claimParams("s3", retryAt.Add(-time.Second), 10))
	require.NoError(t, err)
	require.Empty(t, none, "the retry waits for its time")
	retry, err := e.s.ClaimNotifications(ctx, claimParams("s3", retryAt, 10))
	require.NoError(t, err)
	require.Len(t, retry, 1)
	require.Equal(t, id1, retry[0].ID)
	retry = append(retry, other[0]) // still s2's: its lease holds
	for _, n := range retry {
		ok, err := e.s.FinishNotification(ctx, &n, notify.Outcome{State: notify.StateSent}, retryAt)
		require.NoError(t, err)
		require.True(t, ok)
	}
	states, err := e.s.NotificationStates(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{notify.StateSent: 2}, states)
	// Sent, a notification owes nothing: its message is gone (no next
	// attempt, no holder), its record stays, and it is claimed no more.
	sent, err := e.s.GetNotification(ctx, id1)
	require.NoError(t, err)
	require.Equal(t, notify.StateSent, sent.State)
	require.True(t, sent.NextAttempt.IsZero(), "a sent notification has no next attempt, got %v", sent.NextAttempt)
	require.Empty(t, sent.LeaseOwner)
	later, err := e.s.ClaimNotifications(ctx, claimParams("s4", retryAt.Add(24*time.Hour), 10))
	require.NoError(t, err)
	require.Empty(t, later)
}

// notifyDenylist: addresses are denylisted per channel, listed in pages
// and removed (a missing one too).
func notifyDenylist(t *testing.T, e *env) {
	ctx := e.ctx
	require.NoError(t, e.s.AddDenylistAddress(ctx, notify.ChannelEmail, "spam@x.org"))
	require.NoError(t, e.s.AddDenylistAddress(ctx, notify.ChannelEmail, "spam@x.org"), "twice is fine")
	require.NoError(t, e.s.AddDenylistAddress(ctx, notify.ChannelSlack, "C999"))
	require.NoError(t, e.s.AddDenylistAddress(ctx, notify.ChannelPulse, "spam@x.org"))
	denied, err := e.s.IsDenylisted(ctx, notify.ChannelEmail, "spam@x.org")
	require.NoError(t, err)
	require.True(t, denied)
	denied, err = e.s.IsDenylisted(ctx, notify.ChannelMatrix, "spam@x.org")
	require.NoError(t, err)
	require.False(t, denied)
	page, next, err := e.s.ListDenylist(ctx, store.Page{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []store.DenylistAddress{{NotificationType: "email", NotificationAddress: "spam@x.org"},
		{NotificationType: "pulse", NotificationAddress: "spam@x.org"}}, page)
	page, next, err = e.s.ListDenylist(ctx, store.Page{Limit: 2, ContinuationToken: next})
	require.NoError(t, err)
	require.Equal(t, []store.DenylistAddress{{NotificationType: "slack-channel", NotificationAddress: "C999"}}, page)
	require.Empty(t, next)
	// Email addresses are compared without ASCII case (issue 34: DENY@x
	// and Deny@X reached the mailbox); other channels' as given.
	for _, a := range []string{"SPAM@x.org", "Spam@X.Org", "spam@X.ORG"} {
		denied, err = e.s.IsDenylisted(ctx, notify.ChannelEmail, a)
		require.NoError(t, err)
		require.True(t, denied, a)
	}
	require.NoError(t, e.s.AddDenylistAddress(ctx, notify.ChannelEmail, "Spam@X.org"), "another spelling is the same entry")
	denied, err = e.s.IsDenylisted(ctx, notify.ChannelSlack, "c999")
	require.NoError(t, err)
	require.False(t, denied, "Slack ids are compared as given")
	require.NoError(t, e.s.DeleteDenylistAddress(ctx, notify.ChannelPulse, "spam@x.org"))
	require.NoError(t, e.s.DeleteDenylistAddress(ctx, notify.ChannelPulse, "never@x.org"), "deleting a missing address is fine")
}

// notifyRateLimit: at claim time a denylisted address is denied and one
// address gets no more than the rate limit within its window (the
// denylist of notifyDenylist).
func notifyRateLimit(t *testing.T, e *env) {
	ctx := e.ctx
	now := Epoch.Add(time.Hour)
	_, _, err := e.s.EnqueueNotification(ctx, mail("Spam@X.ORG", "x"), now)
	require.NoError(t, err)
	// The rate limit: 3 of 5 to one address go out; 2 to another do.
	for i := range 5 {
		_, _, err = e.s.EnqueueNotification(ctx, mail("busy@x.org", fmt.Sprint(i)), now)
		require.NoError(t, err)
	}
	for i := range 2 {
		_, _, err = e.s.EnqueueNotification(ctx, mail("calm@x.org", fmt.Sprint(i)), now)
		require.NoError(t, err)
	}
	p := claimParams("s4", now, 100)
	p.RateLimit = 3
	claimed, err := e.s.ClaimNotifications(ctx, p)
	require.NoError(t, err)
	count := map[string]int{}
	for _, n := range claimed {
		count[n.Target]++
	}
	require.Equal(t, map[string]int{"busy@x.org": 3, "calm@x.org": 2}, count)
	for _, n := range claimed {
		ok, err := e.s.FinishNotification(ctx, &n, notify.Outcome{State: notify.StateSent}, now)
		require.NoError(t, err)
		require.True(t, ok)
	}
	states, err := e.s.NotificationStates(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, states[notify.StateDenied])
	require.Equal(t, 2, states[notify.StateRateLimited])
	// Settled in the claim: their messages are done.
	left, err := e.s.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.NotifyService, Kind: store.NotifySend, Owner: "x",
		Now: now.Add(time.Second), Lease: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, left, "the denied and rate-limited notifications' messages are done")
	_, _, err = e.s.EnqueueNotification(ctx, mail("busy@x.org", "later"), now.Add(time.Minute))
	require.NoError(t, err)
	p.Now = now.Add(time.Minute)
	claimed, err = e.s.ClaimNotifications(ctx, p)
	require.NoError(t, err)
	require.Empty(t, claimed, "still within the window")
	_, _, err = e.s.EnqueueNotification(ctx, mail("busy@x.org", "much later"), now.Add(p.RateWindow+time.Second))
	require.NoError(t, err)
	p.Now = now.Add(p.RateWindow + time.Second)
	claimed, err = e.s.ClaimNotifications(ctx, p)
	require.NoError(t, err)
	require.Len(t, claimed, 1, "the window has passed")
}

// testNotifyClaimRace: senders on every replica claim and finish at once;
// each notification is claimed by exactly one of them, and the rate limit
// of one address holds across replicas.
func testNotifyClaimRace(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const n, busy, limit = 300, 40, 10
	for i := range n {
		to := fmt.Sprintf("user%d@x.org", i)
		if i < busy {
			to = "busy@x.org"
		}
		_, _, err := stores[i%len(stores)].EnqueueNotification(ctx, &notify.Message{Email: &notify.Email{Address: to, Subject: fmt.Sprint(i), Content: "c"}}, Epoch)
		require.NoError(t, err)
	}
	var (
		mu     sync.Mutex
		seen   = map[string]string{}
		errs   errorList
		wg     sync.WaitGroup
		toBusy int
	)
	for g := range 8 {
		s := stores[g%len(stores)]
		owner := fmt.Sprintf("sender-%d", g)
		wg.Go(func() {
			for {
				p := claimParams(owner, Epoch, 7)
				p.RateLimit = limit
				got, err := s.ClaimNotifications(ctx, p)
				if err != nil {
					errs.add(err)
					return
				}
				if len(got) == 0 {
					return
				}
				for _, nt := range got {
					mu.Lock()
					if prev, ok := seen[nt.ID]; ok {
						errs.add(fmt.Errorf("notification %s claimed by %s and %s", nt.ID, prev, owner))
					}
					seen[nt.ID] = owner
					if nt.Target == "busy@x.org" {
						toBusy++
					}
					mu.Unlock()
					ok, err := s.FinishNotification(ctx, &nt, notify.Outcome{State: notify.StateSent}, Epoch)
					if err != nil || !ok {
						errs.add(fmt.Errorf("finishing %s: %v %v", nt.ID, ok, err))
					}
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs.errs)
	require.Len(t, seen, n-busy+limit)
	require.Equal(t, limit, toBusy)
	states, err := stores[0].NotificationStates(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{notify.StateSent: n - busy + limit, notify.StateRateLimited: busy - limit}, states)
}

// testNotifyDuplicateRace: the same API request sent by many callers at
// once, on every replica, is stored once per window (issue 34: on
// PostgreSQL, 9 identical requests at once × 20 rounds over 3 replicas
// stored 80 emails where 20 were due, as each caller counted the outbox
// before any had inserted).
func testNotifyDuplicateRace(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const rounds, callers = 20, 9
	total := 0
	for round := range rounds {
		m := mail("race@x.org", fmt.Sprint("round ", round))
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			stored int
			errs   errorList
		)
		start := make(chan struct{})
		for c := range callers {
			s := stores[c%len(stores)]
			wg.Go(func() {
				<-start
				_, dup, err := s.EnqueueNotification(ctx, m, Epoch.Add(time.Duration(c)*time.Millisecond))
				if err != nil {
					errs.add(err)
					return
				}
				if !dup {
					mu.Lock()
					stored++
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		require.Empty(t, errs.errs)
		total += stored
	}
	t.Logf("%d rounds of %d identical requests: %d stored", rounds, callers, total)
	require.Equal(t, rounds, total, "one stored per round")
	states, err := stores[0].NotificationStates(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{notify.StatePending: rounds}, states)
	// After the window the same request is stored again, once.
	later := Epoch.Add(notify.DuplicateWindow + time.Second)
	_, dup, err := stores[1%len(stores)].EnqueueNotification(ctx, mail("race@x.org", "round 0"), later)
	require.NoError(t, err)
	require.False(t, dup)
	_, dup, err = stores[0].EnqueueNotification(ctx, mail("race@x.org", "round 0"), later)
	require.NoError(t, err)
	require.True(t, dup)
}
