package notifysend_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// countingDeliverer counts the sends of each notification; while hold is
// open, a send waits for it to close.
type countingDeliverer struct {
	mu      sync.Mutex
	sends   map[string]int
	started chan string
	hold    chan struct{}
}

func (d *countingDeliverer) Send(ctx context.Context, id, _ string, _ *notify.Message) error {
	d.mu.Lock()
	d.sends[id]++
	d.mu.Unlock()
	if d.hold != nil {
		d.started <- id
		<-d.hold
	}
	return nil
}

func (d *countingDeliverer) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sends[id]
}

// TestNotifySenderKilledHoldingLease: a replica that claimed a
// notification and was killed before sending it holds it for
// notify.Lease, well under a minute; then another replica's sender sends
// it, once (issue 34: it used to wait out a 5-minute lease).
func TestNotifySenderKilledHoldingLease(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			stores := replicas(t, driver, 2)
			clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			failTask(t, stores[0], "killed", clock.Now(), "notify.email.dev@example.com.on-failed")
			ctx := context.Background()
			held, err := stores[0].ClaimNotifications(ctx, store.ClaimNotificationsParams{Owner: "killed-replica", Now: clock.Now(),
				Lease: notify.Lease, Limit: 10})
			require.NoError(t, err)
			require.Len(t, held, 1)

			d := &countingDeliverer{sends: map[string]int{}}
			next := newSender(stores[1], d, clock, "next")
			clock.Advance(time.Second)
			n, err := next.Drain(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "the lease holds")
			clock.Advance(time.Minute - time.Second) // a dead replica holds it a minute at most
			n, err = next.Drain(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, 1, d.count(held[0].ID))
			got, err := stores[1].GetNotification(ctx, held[0].ID)
			require.NoError(t, err)
			require.Equal(t, notify.StateSent, got.State)
		})
	}
}

// TestNotifySenderRenewsWhileSending: a send that outlasts notify.Lease
// keeps its lease (the sender renews it), so no other replica sends the
// notification meanwhile; it is sent and recorded once.
func TestNotifySenderRenewsWhileSending(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			stores := replicas(t, driver, 2)
			clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			failTask(t, stores[0], "slow", clock.Now(), "notify.email.dev@example.com.on-failed")
			ctx := context.Background()
			slow := &countingDeliverer{sends: map[string]int{}, started: make(chan string, 1), hold: make(chan struct{})}
			first := newSender(stores[0], slow, clock, "first")
			first.LeaseRenewal = 10 * time.Millisecond
			done := make(chan error, 1)
			go func() {
				_, err := first.Pass(ctx)
				done <- err
			}()
			id := <-slow.started

			other := &countingDeliverer{sends: map[string]int{}}
			second := newSender(stores[1], other, clock, "second")
			for range 3 {
				clock.Advance(notify.Lease / 2)
				// Wait for a renewal to reach past the new time.
				require.Eventually(t, func() bool {
					n, err := stores[1].GetNotification(ctx, id)
					return err == nil && n.NextAttempt.After(clock.Now())
				}, time.Minute, 5*time.Millisecond)
				n, err := second.Drain(ctx)
				require.NoError(t, err)
				require.Zero(t, n, "still leased to the first sender")
			}
			close(slow.hold)
			require.NoError(t, <-done)
			got, err := stores[1].GetNotification(ctx, id)
			require.NoError(t, err)
			require.Equal(t, notify.StateSent, got.State)
			require.Equal(t, 1, slow.count(id))
			require.Zero(t, other.count(id))
		})
	}
}

// TestNotifySenderKilledHoldingOutboxLease: a replica's sender claimed a
// notification's outbox message (store.NotifyService, store.NotifySend)
// and was killed before reading the notification, so before any record
// of it but the claim: no replica sends it while that lease holds; then
// another replica's sender sends it, once, as the message's second claim,
// and the killed replica's claim can record nothing. On both drivers.
func TestNotifySenderKilledHoldingOutboxLease(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			stores := replicas(t, driver, 2)
			clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			failTask(t, stores[0], "killed-outbox", clock.Now(), "notify.email.dev@example.com.on-failed")
			ctx := context.Background()
			killed, err := stores[0].ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.NotifyService, Kind: store.NotifySend,
				Owner: "killed-replica", Now: clock.Now(), Lease: notify.Lease, Limit: 10})
			require.NoError(t, err)
			require.Len(t, killed, 1)
			id := killed[0].Key

			d := &countingDeliverer{sends: map[string]int{}}
			next := newSender(stores[1], d, clock, "next")
			clock.Advance(time.Second)
			n, err := next.Drain(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "the killed replica's lease holds")
			clock.Advance(notify.Lease - time.Second)
			n, err = next.Drain(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			n, err = next.Drain(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "sent once")
			require.Equal(t, 1, d.count(id))
			got, err := stores[1].GetNotification(ctx, id)
			require.NoError(t, err)
			require.Equal(t, notify.StateSent, got.State)
			require.Equal(t, 2, got.Attempts, "the killed claim and the one that sent it")

			ok, err := stores[0].FinishOutbox(ctx, &killed[0], store.OutboxOutcome{Done: true, Now: clock.Now()})
			require.NoError(t, err)
			require.False(t, ok, "the killed replica's claim is no longer its")
			ok, err = stores[0].FinishNotification(ctx, &store.Notification{ID: id, LeaseOwner: "killed-replica", Attempts: 1},
				notify.Outcome{State: notify.StateFailed, Error: "killed"}, clock.Now())
			require.NoError(t, err)
			require.False(t, ok)
			got, err = stores[1].GetNotification(ctx, id)
			require.NoError(t, err)
			require.Equal(t, notify.StateSent, got.State, "as the sender recorded it")
		})
	}
}
