package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// PurgeRequestExpirer deletes the Purge-Cache service's expired requests at
// Start, then every Interval; each delete is idempotent, so every replica
// may run one.
type PurgeRequestExpirer struct {
	Store  store.PurgeCacheStore
	Clock  queue.Clock
	Logger *slog.Logger
	// Interval is the cadence (default DefaultExpireEvery).
	Interval time.Duration

	loop // its Stop is the duty's
}

var _ Service = (*PurgeRequestExpirer)(nil)

// Start implements Service.
func (e *PurgeRequestExpirer) Start(ctx context.Context) {
	e.loop.start(ctx, e.Logger, "expiring purge requests", interval(e.Interval, DefaultExpireEvery), true, func(ctx context.Context) error {
		_, err := e.Store.ExpirePurgeRequests(ctx, e.Clock.Now())
		return err
	})
}
