package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// GithubReporter moves builds on as their task groups resolve and sends
// statuses and comments to the forges (githubapi.Service.Report).
type GithubReporter interface {
	Report(ctx context.Context) error
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
func (g *GithubReports) Stop() {
	g.loop.Stop()
	g.kicker.wg.Wait()
}
