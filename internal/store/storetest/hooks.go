package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/store"
)

// newHook returns a stored hook of the group, due at next (zero: no
// schedule), waiting to create taskID.
func newHook(group, id string, next time.Time, taskID string) *store.Hook {
	return &store.Hook{
		HookGroupID: group, HookID: id,
		Metadata:      json.RawMessage(`{"name":"n","description":"d","owner":"o@example.com","emailOnError":true}`),
		Task:          json.RawMessage(`{"taskQueueId":"prov/wt"}`),
		Bindings:      json.RawMessage(`[]`),
		Schedule:      json.RawMessage(`["0 0 * * * *"]`),
		TriggerSchema: json.RawMessage(`{"type":"object"}`),
		TriggerToken:  "sealed-token", NextTaskID: taskID, NextScheduled: next,
		Created: Epoch, LastModified: Epoch,
	}
}

func testHooks(t *testing.T, open Opener) {
	e := setup(t, open)
	h := newHook("g1", "nightly/build", Epoch.Add(time.Hour), "task-1")
	created, err := e.s.CreateHook(e.ctx, h)
	require.NoError(t, err)
	require.Equal(t, h, created)
	got, err := e.s.GetHook(e.ctx, "g1", "nightly/build")
	require.NoError(t, err)
	require.Equal(t, h, got)

	// The id is taken: the existing hook comes back with ErrExists.
	dup := newHook("g1", "nightly/build", time.Time{}, "task-2")
	existing, err := e.s.CreateHook(e.ctx, dup)
	require.ErrorIs(t, err, store.ErrExists)
	require.Equal(t, h, existing)

	_, err = e.s.CreateHook(e.ctx, newHook("g2", "a", time.Time{}, "task-3"))
	require.NoError(t, err)
	_, err = e.s.CreateHook(e.ctx, newHook("g1", "a", time.Time{}, "task-4"))
	require.NoError(t, err)

	groups, err := e.s.ListHookGroups(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"g1", "g2"}, groups)
	list, err := e.s.ListHooks(e.ctx, "g1")
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "a", list[0].HookID)
	require.Equal(t, "nightly/build", list[1].HookID)
	all, err := e.s.ListHooks(e.ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 3)
	none, err := e.s.ListHooks(e.ctx, "g3")
	require.NoError(t, err)
	require.Empty(t, none)

	updated, err := e.s.UpdateHook(e.ctx, "g1", "a", func(h *store.Hook) error {
		h.Task = json.RawMessage(`{"changed":true}`)
		h.NextScheduled = Epoch.Add(time.Minute)
		h.LastModified = Epoch.Add(time.Second)
		return nil
	})
	require.NoError(t, err)
	got, err = e.s.GetHook(e.ctx, "g1", "a")
	require.NoError(t, err)
	require.Equal(t, updated, got)
	require.JSONEq(t, `{"changed":true}`, string(got.Task))

	// fn's error changes nothing.
	_, err = e.s.UpdateHook(e.ctx, "g1", "a", func(h *store.Hook) error {
		h.Task = json.RawMessage(`{}`)
		return fmt.Errorf("refused")
	})
	require.EqualError(t, err, "refused")
	got, err = e.s.GetHook(e.ctx, "g1", "a")
	require.NoError(t, err)
	require.Equal(t, updated, got)

	_, err = e.s.UpdateHook(e.ctx, "g1", "missing", func(*store.Hook) error { return nil })
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.s.GetHook(e.ctx, "g1", "missing")
	require.ErrorIs(t, err, store.ErrNotFound)

	// Deleting a hook deletes its fires; deleting it again is no error.
	require.NoError(t, e.s.AddLastFire(e.ctx, &store.LastFire{HookGroupID: "g1", HookID: "a", FiredBy: "triggerHook",
		TaskID: "t", TaskCreateTime: Epoch, Result: "success"}))
	require.NoError(t, e.s.DeleteHook(e.ctx, "g1", "a"))
	require.NoError(t, e.s.DeleteHook(e.ctx, "g1", "a"))
	_, err = e.s.GetHook(e.ctx, "g1", "a")
	require.ErrorIs(t, err, store.ErrNotFound)
	fires, _, err := e.s.ListLastFires(e.ctx, "g1", "a", store.Page{})
	require.NoError(t, err)
	require.Empty(t, fires)
}

// testHookSchedule walks three scheduled hooks ("first" due at +1m,
// "later" at +2m, "never" unscheduled) through claims, leases, fires and
// releases, as replicas of the hooks scheduler would.
func testHookSchedule(t *testing.T, open Opener) {
	e := setup(t, open)
	for _, h := range []*store.Hook{
		newHook("g", "later", Epoch.Add(2*time.Minute), "t-later"),
		newHook("g", "first", Epoch.Add(time.Minute), "t-first"),
		newHook("g", "never", time.Time{}, "t-never"),
	} {
		_, err := e.s.CreateHook(e.ctx, h)
		require.NoError(t, err)
	}
	now := Epoch.Add(90 * time.Second)
	lease := now.Add(10 * time.Second)
	claimDueHookLeased(t, e, now, lease)
	fire := finishFireOnce(t, e, now, lease)
	finishStaleFire(t, e, now, fire)
	reclaimWhenNextDue(t, e, lease)
	retryReleasedClaim(t, e)
}

// claimDueHookLeased: a hook is claimed once due, for a lease nobody else
// gets; once the lease has run out another replica takes it over.
func claimDueHookLeased(t *testing.T, e *env, now, lease time.Time) {
	// Nothing is due before its time.
	h, err := e.s.ClaimDueHook(e.ctx, Epoch, Epoch.Add(10*time.Second))
	require.NoError(t, err)
	require.Nil(t, h)

	h, err = e.s.ClaimDueHook(e.ctx, now, lease)
	require.NoError(t, err)
	require.NotNil(t, h)
	require.Equal(t, "first", h.HookID)
	require.Equal(t, lease, h.ClaimedUntil)
	require.True(t, h.LastClaimEnd.IsZero(), "never claimed before")
	// Leased: nobody else gets it, and "later" is not due yet.
	again, err := e.s.ClaimDueHook(e.ctx, now, lease)
	require.NoError(t, err)
	require.Nil(t, again)

	// A lease that ran out lets another replica take the due time over.
	h2, err := e.s.ClaimDueHook(e.ctx, lease, lease.Add(10*time.Second))
	require.NoError(t, err)
	require.NotNil(t, h2)
	require.Equal(t, "first", h2.HookID)
	require.Equal(t, lease, h2.LastClaimEnd, "the dead replica's lease is where the claim before ended")
}

// finishFireOnce: the fire moves the hook on and is recorded, once: the
// second replica finishing the same fire changes nothing. It returns the
// fire recorded.
func finishFireOnce(t *testing.T, e *env, now, lease time.Time) *store.LastFire {
	fire := &store.LastFire{HookGroupID: "g", HookID: "first", FiredBy: "schedule", TaskID: "t-first",
		TaskCreateTime: now, Result: "success"}
	mail := &notify.Message{Email: &notify.Email{Address: "owner@example.com", Subject: "hook g/first failed", Content: "why"}}
	params := store.FinishFireParams{HookGroupID: "g", HookID: "first", FiredTaskID: "t-first",
		NextTaskID: "t-first-2", NextScheduled: Epoch.Add(time.Hour), Finished: lease.Add(time.Second), Fire: fire, Notify: mail}
	applied, err := e.s.FinishScheduledFire(e.ctx, params)
	require.NoError(t, err)
	require.True(t, applied)
	applied, err = e.s.FinishScheduledFire(e.ctx, params)
	require.NoError(t, err)
	require.False(t, applied)
	// The owner's mail was queued with the record, once.
	sent, err := e.s.ClaimNotifications(e.ctx, claimParams("replica", now.Add(time.Minute), 10))
	require.NoError(t, err)
	require.Len(t, sent, 1)
	require.Equal(t, notify.ChannelEmail, sent[0].Channel)
	require.Equal(t, "owner@example.com", sent[0].Target)
	var mailed notify.Message
	require.NoError(t, json.Unmarshal(sent[0].Message, &mailed))
	require.Equal(t, *mail.Email, *mailed.Email)
	fires, next, err := e.s.ListLastFires(e.ctx, "g", "first", store.Page{})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, []store.LastFire{*fire}, fires)
	got, err := e.s.GetHook(e.ctx, "g", "first")
	require.NoError(t, err)
	require.Equal(t, "t-first-2", got.NextTaskID)
	require.Equal(t, Epoch.Add(time.Hour), got.NextScheduled)
	require.Equal(t, lease.Add(time.Second), got.ClaimedUntil, "the claim ended when the fire did")
	return fire
}

// finishStaleFire: a fire that ends after the hook was updated (a new
// taskId awaits) moves nothing on but is still recorded, once, after fire;
// a removed hook records nothing.
func finishStaleFire(t *testing.T, e *env, now time.Time, fire *store.LastFire) {
	_, err := e.s.UpdateHook(e.ctx, "g", "first", func(h *store.Hook) error { h.NextTaskID = "t-updated"; return nil })
	require.NoError(t, err)
	late := &store.LastFire{HookGroupID: "g", HookID: "first", FiredBy: "schedule", TaskID: "t-first-2",
		TaskCreateTime: now, Result: "success"}
	for range 2 {
		applied, err := e.s.FinishScheduledFire(e.ctx, store.FinishFireParams{HookGroupID: "g", HookID: "first", FiredTaskID: "t-first-2",
			NextTaskID: "t-other", NextScheduled: Epoch.Add(2 * time.Hour), Fire: late})
		require.NoError(t, err)
		require.False(t, applied)
	}
	fires, _, err := e.s.ListLastFires(e.ctx, "g", "first", store.Page{})
	require.NoError(t, err)
	require.Equal(t, []store.LastFire{*late, *fire}, fires)
	got, err := e.s.GetHook(e.ctx, "g", "first")
	require.NoError(t, err)
	require.Equal(t, "t-updated", got.NextTaskID)
	// A removed hook records nothing.
	applied, err := e.s.FinishScheduledFire(e.ctx, store.FinishFireParams{HookGroupID: "g", HookID: "gone", FiredTaskID: "x", Fire: late})
	require.NoError(t, err)
	require.False(t, applied)
}

// reclaimWhenNextDue: a hook whose fire was recorded is claimed again when
// next due; the claim before it ended when the fire was recorded.
func reclaimWhenNextDue(t *testing.T, e *env, lease time.Time) {
	_, err := e.s.UpdateHook(e.ctx, "g", "first", func(h *store.Hook) error { h.NextScheduled = lease.Add(5 * time.Second); return nil })
	require.NoError(t, err)
	h, err := e.s.ClaimDueHook(e.ctx, lease.Add(5*time.Second), lease.Add(15*time.Second))
	require.NoError(t, err)
	require.Equal(t, "first", h.HookID)
	require.Equal(t, lease.Add(time.Second), h.LastClaimEnd)
	applied, err := e.s.FinishScheduledFire(e.ctx, store.FinishFireParams{HookGroupID: "g", HookID: "first", FiredTaskID: "t-updated",
		NextTaskID: "t-first-3", NextScheduled: Epoch.Add(time.Hour), Finished: lease.Add(6 * time.Second)})
	require.NoError(t, err)
	require.True(t, applied)
}

// retryReleasedClaim: a released claim is retried at once, the claim
// before it standing.
func retryReleasedClaim(t *testing.T, e *env) {
	later := Epoch.Add(3 * time.Minute)
	h, err := e.s.ClaimDueHook(e.ctx, later, later.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, "later", h.HookID)
	require.NoError(t, e.s.ReleaseHookClaim(e.ctx, &store.Hook{HookGroupID: "g", HookID: "later", NextTaskID: "t-later", LastClaimEnd: later.Add(-time.Second)}))
	h, err = e.s.ClaimDueHook(e.ctx, later, later.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, "later", h.HookID)
	require.Equal(t, later.Add(-time.Second), h.LastClaimEnd)
}

// testHookClaimRace has many callers claim one due hook at once: exactly
// one gets it.
func testHookClaimRace(t *testing.T, open Opener) {
	e := setup(t, open)
	_, err := e.s.CreateHook(e.ctx, newHook("g", "h", Epoch, "t"))
	require.NoError(t, err)
	const callers = 8
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		claims int
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := e.s.ClaimDueHook(e.ctx, Epoch.Add(time.Second), Epoch.Add(time.Minute))
			if !assertNoError(t, err) || h == nil {
				return
			}
			mu.Lock()
			claims++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, 1, claims)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func testHookLastFires(t *testing.T, open Opener) {
	e := setup(t, open)
	for i := range 5 {
		require.NoError(t, e.s.AddLastFire(e.ctx, &store.LastFire{HookGroupID: "g", HookID: "h", FiredBy: "triggerHook",
			TaskID: fmt.Sprintf("t%d", i), TaskCreateTime: Epoch.Add(time.Duration(i) * time.Second), Result: "error", Error: "boom"}))
	}
	require.NoError(t, e.s.AddLastFire(e.ctx, &store.LastFire{HookGroupID: "g", HookID: "other", FiredBy: "schedule",
		TaskID: "x", TaskCreateTime: Epoch, Result: "success"}))
	var ids []string
	page := store.Page{Limit: 2}
	for {
		fires, next, err := e.s.ListLastFires(e.ctx, "g", "h", page)
		require.NoError(t, err)
		for _, f := range fires {
			ids = append(ids, f.TaskID)
		}
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	require.Equal(t, []string{"t4", "t3", "t2", "t1", "t0"}, ids, "newest first")
	_, _, err := e.s.ListLastFires(e.ctx, "g", "h", store.Page{ContinuationToken: "!!"})
	require.ErrorIs(t, err, store.ErrBadContinuationToken)

	// Fire records are kept a year.
	n, err := e.s.ExpireHookFires(e.ctx, Epoch.Add(store.LastFireRetention+2500*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 4, n, "t0, t1, t2 and x are older than a year; t3, t4 are not")
	ids = nil
	fires, _, err := e.s.ListLastFires(e.ctx, "g", "h", store.Page{})
	require.NoError(t, err)
	for _, f := range fires {
		ids = append(ids, f.TaskID)
	}
	require.Equal(t, []string{"t4", "t3"}, ids)
}
