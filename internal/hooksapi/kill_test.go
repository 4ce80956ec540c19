package hooksapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// TestFirerKilledHoldingFireLease: a replica claimed a hook's due time
// (the hook's outbox message, leased 10 s) and was killed before firing
// it: no replica fires it while the lease holds; then another fires it,
// once, with the due time's own taskId, and the hook's message waits for
// the next due time. On both drivers.
func TestFirerKilledHoldingFireLease(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, driver)
			ctx := context.Background()
			b.hookRole(t, "g")
			b.createHook(t, "g", "h", []string{"0 * * * * *"}, taskTemplate(""))
			due := b.nextDue(t, "g", "h")
			now := due.Add(time.Second)
			b.clock.Set(now)
			killed, err := b.store.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.HooksService, Kind: store.HookFire,
				Owner: "killed-replica", Now: now, Lease: 10 * time.Second, Limit: 10})
			require.NoError(t, err)
			require.Len(t, killed, 1)
			require.Equal(t, "g/h", killed[0].Key)

			require.Zero(t, b.fireDue(t, b.firer), "the lease holds")
			b.clock.Set(now.Add(10 * time.Second))
			require.Equal(t, 1, b.fireDue(t, b.firer))
			require.Zero(t, b.fireDue(t, b.firer), "fired once")
			fires := b.fires(t, "g", "h")
			require.Len(t, fires, 1)
			require.Equal(t, "success", fires[0].Result, fires[0].Error)
			counts, err := b.root.TaskQueueCounts(ctx, testQueue)
			require.NoError(t, err)
			require.Equal(t, 1, counts.PendingTasks)
			require.Equal(t, due.Add(time.Minute), b.nextDue(t, "g", "h"))
			ok, err := b.store.FinishOutbox(ctx, &killed[0], store.OutboxOutcome{Done: true, Now: b.clock.Now()})
			require.NoError(t, err)
			require.False(t, ok, "the killed replica's claim is no longer its")
			b.clock.Set(due.Add(time.Minute))
			require.Equal(t, 1, b.fireDue(t, b.firer), "the next due time")
		})
	}
}
