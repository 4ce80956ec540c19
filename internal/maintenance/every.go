package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Every schedules a service's own duty: Pass every Interval, and once at
// start, until stopped. The duty's logic lives in its service's package
// (notifysend.Sender's Drain, hooksapi.PulseListener's Sync, the github
// service's passes, …); this package only runs it.
//
// Two ways ask for a pass before the next tick. Wake runs one as soon as
// the pass under way (if any) ends: the hooks' Pulse listener is woken
// when a hook changes. Kick runs one at once, beside the pass under way,
// for a duty whose passes may overlap because each item is leased: the
// github service kicks its deliveries and reports when it stores one, so
// a new delivery is not held behind a slow forge. Both are safe before
// Start and after Stop, and requests that come while one waits are one.
type Every struct {
	// What names the duty in the log when a pass fails.
	What string
	// Interval is the cadence; it must be positive.
	Interval time.Duration
	Pass     func(ctx context.Context) error
	Logger   *slog.Logger
	loop
	kicker
}

var _ Service = (*Every)(nil)

// Start implements Service.
func (e *Every) Start(ctx context.Context) {
	e.start(ctx, e.Logger, e.What, e.Interval, true, e.Pass)
	e.watch(e.loopContext(), e.Logger, e.What, e.Pass)
}

// Stop implements Service: it ends the loop and any kicked pass and
// waits for both; safe to call twice, and before Start.
func (e *Every) Stop() {
	e.loop.Stop()
	e.wg.Wait()
}

// kicker runs a pass whenever kicked, in a goroutine of its own beside
// the loop's.
type kicker struct {
	once sync.Once
	ch   chan struct{}
	wg   sync.WaitGroup
}

func (k *kicker) kicks() chan struct{} {
	k.once.Do(func() { k.ch = make(chan struct{}, 1) })
	return k.ch
}

// Kick asks for a pass at once, beside the one under way; it never
// blocks.
func (k *kicker) Kick() {
	select {
	case k.kicks() <- struct{}{}:
	default:
	}
}

// watch runs pass whenever kicked, until ctx ends.
func (k *kicker) watch(ctx context.Context, log *slog.Logger, what string, pass func(context.Context) error) {
	k.wg.Add(1)
	kicks := k.kicks()
	go func() {
		defer k.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-kicks:
				if err := pass(ctx); err != nil && ctx.Err() == nil {
					logger(log).Error(what, "error", err)
				}
			}
		}
	}()
}
