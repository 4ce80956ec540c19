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

// GithubReporter moves builds on as their task groups resolve and sends
// statuses and comments to the forges (githubapi.Service.Report).
type GithubReporter interface {
	Report(ctx context.Context) error
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

// GithubReports reports builds back to the forges, with retries and
// back-off, never moving a build's state backwards.
type GithubReports struct {
	Reporter GithubReporter
	Logger   *slog.Logger
	Interval time.Duration
	kicker
	loop
}

var _ Service = (*GithubReports)(nil)

// Start implements Service.
func (g *GithubReports) Start(ctx context.Context) {
	g.loop.start(ctx, g.Logger, "reporting builds to the forges", interval(g.Interval, DefaultGithubTick), true, g.Reporter.Report)
	g.kicker.watch(g.loopContext(), g.Logger, "reporting builds to the forges", g.Reporter.Report)
}

// Stop implements Service.
func (g *GithubDeliveries) Stop() {
	g.loop.Stop()
	g.kicker.wg.Wait()
}

// Stop implements Service.
func (g *GithubReports) Stop() {
	g.loop.Stop()
	g.kicker.wg.Wait()
}

// DefaultGithubInstallationsInterval is how often the App's installations
// are listed again (Taskcluster's syncInstallations runs daily).
const DefaultGithubInstallationsInterval = 24 * time.Hour

// GithubInstallationSyncer records where the forges' GitHub Apps are
// installed (githubapi.Service.SyncInstallations).
type GithubInstallationSyncer interface {
	SyncInstallations(ctx context.Context) (int, error)
}

// GithubInstallations lists the GitHub Apps' installations at start and
// then daily, so that an installation whose delivery was missed is known.
// Every replica may run it: recording an installation again changes
// nothing.
type GithubInstallations struct {
	Syncer   GithubInstallationSyncer
	Logger   *slog.Logger
	Interval time.Duration
	loop
}

var _ Service = (*GithubInstallations)(nil)

// Start implements Service.
func (g *GithubInstallations) Start(ctx context.Context) {
	g.loop.start(ctx, g.Logger, "listing the GitHub Apps' installations", interval(g.Interval, DefaultGithubInstallationsInterval), true,
		func(ctx context.Context) error {
			n, err := g.Syncer.SyncInstallations(ctx)
			if n > 0 {
				logger(g.Logger).Info("GitHub App installations recorded", "count", n)
			}
			return err
		})
}

// Stop implements Service.
func (g *GithubInstallations) Stop() { g.loop.Stop() }
