package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultGithubTick is how often the forge duties look for work when
// nothing kicked them.
const DefaultGithubTick = time.Second

// GithubProcessor processes stored webhook deliveries
// (githubapi.Service.ProcessDue); each delivery is leased to one caller.
type GithubProcessor interface {
	ProcessDue(ctx context.Context) (int, error)
}

// GithubDeliveries processes webhook deliveries stored by the webhook:
// renders `.taskcluster.yml` and creates the tasks. Every replica runs
// one; a delivery whose processor died is taken again when its lease
// runs out.
type GithubDeliveries struct {
	Processor GithubProcessor
	Logger    *slog.Logger
	Interval  time.Duration
	kicker
	loop
}

// kicker lets the webhook start a pass at once instead of at the next
// tick (a delivery was stored, a message queued).
type kicker struct {
	once sync.Once
	ch   chan struct{}
	wg   sync.WaitGroup
}

func (k *kicker) kicks() chan struct{} {
	k.once.Do(func() { k.ch = make(chan struct{}, 1) })
	return k.ch
}

// Kick asks for a pass now; it never blocks.
func (k *kicker) Kick() {
	select {
	case k.kicks() <- struct{}{}:
	default:
	}
}

// watch runs pass whenever kicked, until ctx ends.
func (k *kicker) watch(ctx context.Context, log *slog.Logger, what string, pass func(context.Context) error) {
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.kicks():
				if err := pass(ctx); err != nil && ctx.Err() == nil {
					logger(log).Error(what, "error", err)
				}
			}
		}
	}()
}

var _ Service = (*GithubDeliveries)(nil)

// Start implements Service.
func (g *GithubDeliveries) Start(ctx context.Context) {
	pass := func(ctx context.Context) error {
		_, err := g.Processor.ProcessDue(ctx)
		return err
	}
	g.loop.start(ctx, g.Logger, "processing webhook deliveries", interval(g.Interval, DefaultGithubTick), true, pass)
	g.kicker.watch(g.loopContext(), g.Logger, "processing webhook deliveries", pass)
}

// Stop implements Service.
func (g *GithubDeliveries) Stop() {
	g.loop.Stop()
	g.kicker.wg.Wait()
}
