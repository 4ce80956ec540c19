// Package maintenance runs the queue's background duties: expiring claims
// whose takenUntil passed, resolving tasks past their deadline, and
// deleting expired data. One duty a file, each a Service with Start and
// Stop; a Maintainer starts and stops them together.
//
// The duties call the store and hand what changed to an EventPublisher;
// they know nothing of HTTP. Every step re-checks each task under its row
// lock, so several hopper processes sharing one PostgreSQL database may all
// run them: the work is idempotent row by row.
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/store"
)

// Defaults of the duties' settings.
const (
	// DefaultTick is the cadence of claim expiry and deadline resolution,
	// so both happen within about a second of their due time.
	DefaultTick = 250 * time.Millisecond
	// DefaultDeadlineDelay is how long after its deadline an unresolved
	// task is resolved (hopper serve's --deadline-delay).
	DefaultDeadlineDelay = time.Minute
	// DefaultExpireEvery is the cadence of data expiration.
	DefaultExpireEvery = 10 * time.Minute
	// batchSize bounds the tasks one store call changes, so one pass is a
	// series of short transactions.
	batchSize = 100
)

// EventPublisher receives the changes a duty committed, in order, to
// publish their events and count them (api.Server.Publish).
type EventPublisher interface {
	Publish(ctx context.Context, changes []store.Change)
}

// Service is one long-lived duty.
type Service interface {
	// Start runs the duty in the background until Stop or ctx ends.
	Start(ctx context.Context)
	// Stop ends the duty and waits for it; safe to call twice.
	Stop()
}

// Maintainer starts and stops a set of services together.
type Maintainer struct {
	services []Service
}

// NewMaintainer groups services; they start in order and stop in reverse.
func NewMaintainer(services ...Service) *Maintainer {
	return &Maintainer{services: services}
}

// Start starts every service.
func (m *Maintainer) Start(ctx context.Context) {
	for _, s := range m.services {
		s.Start(ctx)
	}
}

// Stop stops every service and waits for them; safe to call twice.
func (m *Maintainer) Stop() {
	for i := len(m.services) - 1; i >= 0; i-- {
		m.services[i].Stop()
	}
}

// loop runs a pass on a ticker in one goroutine: what every duty's Start
// and Stop share.
type loop struct {
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
	ctx      context.Context
	// wake asks for a pass now (Wake); made on first use.
	wakeOnce sync.Once
	wake     chan struct{}
}

func (l *loop) wakeC() chan struct{} {
	l.wakeOnce.Do(func() { l.wake = make(chan struct{}, 1) })
	return l.wake
}

// Wake asks for a pass as soon as the one running (if any) ends, instead
// of at the next tick; wake-ups that come while one is waiting are one.
// Safe before start and after Stop.
func (l *loop) Wake() {
	select {
	case l.wakeC() <- struct{}{}:
	default:
	}
}

// loopContext is the context of a started loop, ended by Stop.
func (l *loop) loopContext() context.Context { return l.ctx }

// start runs pass every interval (and once at once if immediately) until
// ctx ends or stop is called. A pass that fails is logged as what failed
// (unless the loop is stopping) and retried at the next tick.
func (l *loop) start(ctx context.Context, log *slog.Logger, what string, interval time.Duration, immediately bool, pass func(context.Context) error) {
	log = logger(log)
	run := func(ctx context.Context) {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			log.Error(what, "error", err)
		}
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.ctx = ctx
	l.done = make(chan struct{})
	wake := l.wakeC()
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		if immediately {
			run(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				run(ctx)
			case <-wake:
				run(ctx)
			}
		}
	}()
}

// Stop ends the loop and waits for it; safe to call twice, and before
// start. The duties embed a loop, so this is their Service.Stop.
func (l *loop) Stop() {
	l.stopOnce.Do(func() {
		if l.cancel != nil {
			l.cancel()
			<-l.done
		}
	})
}

// drain calls step until it changes fewer than batchSize tasks, publishing
// each batch's changes; it returns how many tasks changed in all.
func drain(ctx context.Context, pub EventPublisher, step func() (*store.Result, error)) (int, error) {
	n := 0
	for {
		res, err := step()
		if err != nil {
			return n, err
		}
		if pub != nil {
			pub.Publish(ctx, res.Changes)
		}
		n += len(res.Changes)
		if len(res.Changes) < batchSize {
			return n, nil
		}
	}
}

// logger returns l, or a logger that discards when l is nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
