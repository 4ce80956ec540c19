package maintenance

import (
	"context"
	"log/slog"
	"time"
)

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
