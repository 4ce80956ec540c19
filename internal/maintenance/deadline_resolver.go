package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/store"
)

// DeadlineStore is the store as DeadlineResolver uses it.
type DeadlineStore interface {
	ExpireDeadlines(ctx context.Context, cutoff, now time.Time, limit int) (*store.Result, error)
}

// DeadlineResolver resolves tasks still unresolved Delay after their
// deadline exception/deadline-exceeded, whatever their state
// (queue.TaskState.ExpireDeadline).
type DeadlineResolver struct {
	Store     DeadlineStore
	Publisher EventPublisher
	Clock     clock.Clock
	Logger    *slog.Logger
	// Delay is how long after its deadline an unresolved task is resolved.
	Delay time.Duration
	// Interval is the cadence (default DefaultTick).
	Interval time.Duration

	loop // its Stop is the duty's
}

var _ Service = (*DeadlineResolver)(nil)

// Start implements Service.
func (r *DeadlineResolver) Start(ctx context.Context) {
	r.loop.start(ctx, r.Logger, "resolving deadlines", interval(r.Interval, DefaultTick), false, func(ctx context.Context) error {
		_, err := r.RunOnce(ctx)
		return err
	})
}

// RunOnce resolves every task due now and returns how many tasks changed.
func (r *DeadlineResolver) RunOnce(ctx context.Context) (int, error) {
	now := r.Clock.Now()
	return drain(ctx, r.Publisher, func() (*store.Result, error) {
		return r.Store.ExpireDeadlines(ctx, now.Add(-r.Delay), now, batchSize)
	})
}
