package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/store"
)

// ClaimStore is the store as ClaimExpirer uses it.
type ClaimStore interface {
	ExpireClaims(ctx context.Context, now time.Time, limit int) (*store.Result, error)
}

// ClaimExpirer resolves runs whose claim ran out (takenUntil passed without
// a reclaim) exception/claim-expired, adding a retry run while retries are
// left (queue.TaskState.ExpireClaim).
type ClaimExpirer struct {
	Store     ClaimStore
	Publisher EventPublisher
	Clock     clock.Clock
	Logger    *slog.Logger
	// Interval is the cadence (default DefaultTick).
	Interval time.Duration

	loop // its Stop is the duty's
}

var _ Service = (*ClaimExpirer)(nil)

// Start implements Service.
func (e *ClaimExpirer) Start(ctx context.Context) {
	e.loop.start(ctx, e.Logger, "expiring claims", interval(e.Interval, DefaultTick), false, func(ctx context.Context) error {
		_, err := e.RunOnce(ctx)
		return err
	})
}

// RunOnce expires every claim due now and returns how many tasks changed.
func (e *ClaimExpirer) RunOnce(ctx context.Context) (int, error) {
	now := e.Clock.Now()
	return drain(ctx, e.Publisher, func() (*store.Result, error) {
		return e.Store.ExpireClaims(ctx, now, batchSize)
	})
}

// interval returns d, or def when d is not positive.
func interval(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
