package object

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Expirer deletes expired objects and stale unfinished uploads on a slow
// tick. Several hopper processes may run one each: the store hands every
// expired row to one of them (rows are locked, skipping those another
// process holds).
type Expirer struct {
	Service *Service
	// Every is the cadence (default 10 min).
	Every time.Duration
	Log   *slog.Logger

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start runs the loop until Stop or ctx ends; it expires once at once.
func (e *Expirer) Start(ctx context.Context) {
	if e.Every <= 0 {
		e.Every = 10 * time.Minute
	}
	if e.Log == nil {
		e.Log = slog.Default()
	}
	ctx, e.cancel = context.WithCancel(ctx)
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		tick := time.NewTicker(e.Every)
		defer tick.Stop()
		for {
			if n, err := e.Service.Expire(ctx); err != nil && ctx.Err() == nil {
				e.Log.Error("expiring objects", "error", err)
			} else if n > 0 {
				e.Log.Info("expired objects", "objects", n)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// Stop ends the loop and waits for it; safe to call twice, or before Start.
func (e *Expirer) Stop() {
	e.stopOnce.Do(func() {
		if e.cancel != nil {
			e.cancel()
			<-e.done
		}
	})
}
