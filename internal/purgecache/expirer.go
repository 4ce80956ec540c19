package purgecache

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Expirer deletes expired purge requests on a slow tick; running one per
// hopper process is harmless (each delete is idempotent).
type Expirer struct {
	Store store.PurgeCacheStore
	Clock queue.Clock
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
	if e.Clock == nil {
		e.Clock = queue.SystemClock{}
	}
	ctx, e.cancel = context.WithCancel(ctx)
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		tick := time.NewTicker(e.Every)
		defer tick.Stop()
		for {
			if _, err := e.Store.ExpirePurgeRequests(ctx, e.Clock.Now()); err != nil && ctx.Err() == nil {
				e.Log.Error("expiring purge requests", "error", err)
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
