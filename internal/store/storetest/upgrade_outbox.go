package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/store"
)

// testUpgradeGithubOutbox: migration 046 moves the forge's messages from
// their own table into the outbox with their meaning: a comment sent
// before the upgrade is still not posted again, a status a sender held
// is due when its lease would have ended (and only then), with its body
// and fields, and a message given up stays given up.
func testUpgradeGithubOutbox(t *testing.T, before Upgrader) {
	exec, open := before(t, 45)
	now := time.Now().UTC().Truncate(time.Millisecond)
	leaseEnd := now.Add(time.Minute)
	row := func(key, kind, target, body, state string, attempts int, next, claimed time.Time) {
		exec(fmt.Sprintf(`INSERT INTO github_outbox (host, outbox_key, kind, owner, repo, target, installation_id, body, seq, state,
			attempts, next_attempt, claimed_until, last_error, created) VALUES ('github.com', '%s', '%s', 'o', 'r', '%s', 7, '%s', 2, '%s',
			%d, %d, %d, 'e', %d)`, key, kind, target, body, state, attempts, next.UnixMilli(), claimed.UnixMilli(), now.UnixMilli()))
	}
	row("comment:c", "comment", "3", `{"body":"hi"}`, "sent", 1, now, time.UnixMilli(0))
	row("status:g", "status", "abc", `{"state":"success"}`, "pending", 1, now, leaseEnd)
	row("reaction:x", "reaction", "9", `{"content":"+1"}`, "failed", 20, now, time.UnixMilli(0))
	s := open()
	ctx := context.Background()
	for key, state := range map[string]string{"comment:c": "sent", "status:g": "pending", "reaction:x": "failed"} {
		got, err := s.GetGithubOutbox(ctx, "github.com", key)
		require.NoError(t, err, key)
		require.Equal(t, state, got.State, key)
		require.EqualValues(t, 2, got.Seq, key)
		require.Equal(t, "e", got.LastError, key)
		require.Equal(t, now, got.Created, key)
	}
	claim := func(at time.Time) []store.OutboxMessage {
		got, err := s.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubSend, Owner: "new",
			Now: at, Lease: time.Minute, Limit: 10})
		require.NoError(t, err)
		return got
	}
	require.Empty(t, claim(now), "the status's old lease holds")
	require.NoError(t, s.QueueGithubOutbox(ctx, []store.GithubOutboxEntry{{Host: "github.com", Key: "comment:c", Kind: "comment",
		Owner: "o", Repo: "r", Target: "3", Body: []byte(`{"body":"hi"}`)}}, now))
	due := claim(leaseEnd)
	require.Len(t, due, 1, "the status, not the comment sent before")
	e, err := store.GithubOutboxEntryOf(&due[0])
	require.NoError(t, err)
	require.Equal(t, store.GithubOutboxEntry{Host: "github.com", Key: "status:g", Kind: "status", Owner: "o", Repo: "r", Target: "abc",
		InstallationID: 7, Body: []byte(`{"state":"success"}`), Seq: 2, State: "pending", Attempts: 2, LastError: "e", Created: now}, e)
}

// testUpgradeGithubDeliveries: migration 047 gives each pending delivery
// its outbox message: one a replica held is claimed once that lease
// would have ended, with its attempts counted on; a processed one is
// never claimed.
func testUpgradeGithubDeliveries(t *testing.T, before Upgrader) {
	exec, open := before(t, 46)
	now := time.Now().UTC().Truncate(time.Millisecond)
	leaseEnd := now.Add(time.Minute)
	row := func(id, state string, claimed time.Time) {
		exec(fmt.Sprintf(`INSERT INTO github_deliveries (host, delivery_id, forge, event, body, received, state, attempts, next_attempt,
			claimed_until, outcome, error, digest, replay_of) VALUES ('github.com', '%s', 'github', 'push', '{}', %d, '%s', 1, %d, %d, '', '', '', '')`,
			id, now.UnixMilli(), state, now.UnixMilli(), claimed.UnixMilli()))
	}
	row("held", store.DeliveryPending, leaseEnd)
	row("done", store.DeliveryDone, time.UnixMilli(0))
	s := open()
	ctx := context.Background()
	d, err := s.ClaimGithubDelivery(ctx, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.Nil(t, d, "the old lease holds")
	d, err = s.ClaimGithubDelivery(ctx, leaseEnd, leaseEnd.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, "held", d.DeliveryID)
	require.Equal(t, 2, d.Attempts)
	require.NoError(t, s.FinishGithubDelivery(ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: d.ClaimedUntil, State: store.DeliveryDone, Now: leaseEnd}))
	d, err = s.ClaimGithubDelivery(ctx, leaseEnd.Add(time.Hour), leaseEnd.Add(2*time.Hour))
	require.NoError(t, err)
	require.Nil(t, d)
}

// testUpgradeHooks: migration 048 gives each hook with a schedule its
// outbox message: one a replica held is claimed once that lease would
// have ended, the end of that lease standing as the claim before; a hook
// without a schedule is never claimed.
func testUpgradeHooks(t *testing.T, before Upgrader) {
	exec, open := before(t, 47)
	now := time.Now().UTC().Truncate(time.Millisecond)
	leaseEnd := now.Add(10 * time.Second)
	row := func(id string, next, claimed int64) {
		exec(fmt.Sprintf(`INSERT INTO hooks (hook_group_id, hook_id, metadata, task, bindings, schedule, trigger_schema, trigger_token,
			next_task_id, next_scheduled, claimed_until, created, last_modified) VALUES ('g', '%s', '{}', '{}', '[]', '[]', '{}', '', 't-%s', %d, %d, %d, %d)`,
			id, id, next, claimed, now.UnixMilli(), now.UnixMilli()))
	}
	row("held", now.Add(-time.Second).UnixMilli(), leaseEnd.UnixMilli())
	row("unscheduled", 0, 0)
	s := open()
	ctx := context.Background()
	h, err := s.ClaimDueHook(ctx, now, now.Add(10*time.Second))
	require.NoError(t, err)
	require.Nil(t, h, "the old lease holds")
	h, err = s.ClaimDueHook(ctx, leaseEnd, leaseEnd.Add(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, "held", h.HookID)
	require.Equal(t, leaseEnd, h.LastClaimEnd)
	h, err = s.ClaimDueHook(ctx, leaseEnd.Add(5*time.Second), leaseEnd.Add(15*time.Second))
	require.NoError(t, err)
	require.Nil(t, h, "held by the new claim; the unscheduled hook is never due")
}

// testUpgradeNotifyOutbox: migration 053 gives each pending notification
// its outbox message: one waiting for a retry is claimed at its time,
// one a sender held once that lease would have ended, each with its
// attempts counted on and its retry's time answered as before; one sent
// or refused is never claimed.
func testUpgradeNotifyOutbox(t *testing.T, before Upgrader) {
	exec, open := before(t, 52)
	now := time.Now().UTC().Truncate(time.Millisecond)
	leaseEnd := now.Add(notify.Lease)
	row := func(id, state string, next time.Time, owner string) {
		exec(fmt.Sprintf(`INSERT INTO notify_outbox (id, channel, target, task_id, run_id, event, route, status, message, dedup,
			state, attempts, next_attempt, lease_owner, reserved_at, error, created, updated, expires)
			VALUES ('%s', 'email', 'a@x.org', '', -1, '', '', NULL, '{}', NULL, '%s', 1, %d, %s, %d, 'e', %d, %d, %d)`,
			id, state, next.UnixMilli(), owner, now.UnixMilli(), now.UnixMilli(), now.UnixMilli(), now.Add(time.Hour).UnixMilli()))
	}
	row("n1-retry", notify.StatePending, now.Add(-time.Second), "NULL")
	row("n2-held", notify.StatePending, leaseEnd, "'old-sender'")
	row("n3-sent", notify.StateSent, now, "NULL")
	row("n4-refused", notify.StateRefused, now, "NULL")
	s := open()
	ctx := context.Background()
	held, err := s.GetNotification(ctx, "n2-held")
	require.NoError(t, err)
	require.Equal(t, leaseEnd, held.NextAttempt, "due when the old lease ends")
	require.Equal(t, 1, held.Attempts)
	claim := func(at time.Time) []string {
		got, err := s.ClaimNotifications(ctx, store.ClaimNotificationsParams{Owner: "new", Now: at, Lease: notify.Lease, Limit: 10,
			RateLimit: notify.RateLimitCount, RateWindow: notify.RateLimitWindow})
		require.NoError(t, err)
		var ids []string
		for _, n := range got {
			require.Equal(t, 2, n.Attempts, n.ID)
			ok, err := s.FinishNotification(ctx, &n, notify.Outcome{State: notify.StateSent}, at)
			require.NoError(t, err)
			require.True(t, ok)
			ids = append(ids, n.ID)
		}
		return ids
	}
	require.Equal(t, []string{"n1-retry"}, claim(now), "the old lease holds")
	require.Equal(t, []string{"n2-held"}, claim(leaseEnd))
	require.Empty(t, claim(leaseEnd.Add(time.Hour)), "nothing sent or refused before is claimed")
	states, err := s.NotificationStates(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{notify.StateSent: 3, notify.StateRefused: 1}, states)
}
