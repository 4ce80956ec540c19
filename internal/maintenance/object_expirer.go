package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// ObjectSweeper deletes expired objects and stale unfinished uploads and
// says how many it deleted (object.Service.Expire). The store hands every
// expired row to one process (rows are locked, skipping those another
// holds), so every replica may run an ObjectExpirer.
type ObjectSweeper interface {
	Expire(ctx context.Context) (int, error)
}

// ObjectExpirer is the Object service's expiry: it sweeps at Start, then
// every Interval.
type ObjectExpirer struct {
	Objects ObjectSweeper
	Logger  *slog.Logger
	// Interval is the cadence (default DefaultExpireEvery).
	Interval time.Duration

	loop // its Stop is the duty's
}

var _ Service = (*ObjectExpirer)(nil)

// Start implements Service.
func (e *ObjectExpirer) Start(ctx context.Context) {
	log := logger(e.Logger)
	e.loop.start(ctx, e.Logger, "expiring objects", interval(e.Interval, DefaultExpireEvery), true, func(ctx context.Context) error {
		n, err := e.Objects.Expire(ctx)
		if n > 0 {
			log.Info("expired objects", "objects", n)
		}
		return err
	})
}
