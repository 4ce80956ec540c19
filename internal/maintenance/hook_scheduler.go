package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// DefaultHookTick is how often the hook scheduler looks for due hooks, so
// a hook fires within about a second of its due time.
const DefaultHookTick = time.Second

// HookFirer fires every hook whose due time has come and says how many it
// fired (hooksapi.Firer). Each due time must fire once however many
// processes call it at once.
type HookFirer interface {
	FireDue(ctx context.Context) (int, error)
}

// HookScheduler is the Hooks service's cron: it fires scheduled hooks when
// they are due. Every replica runs one; the firer gives each due time to
// one of them (a lease on the hook's outbox message) and records it once.
type HookScheduler struct {
	Firer  HookFirer
	Logger *slog.Logger
	// Interval is the cadence (default DefaultHookTick).
	Interval time.Duration

	loop // its Stop is the duty's
}

var _ Service = (*HookScheduler)(nil)

// Start implements Service.
func (s *HookScheduler) Start(ctx context.Context) {
	s.loop.start(ctx, s.Logger, "firing scheduled hooks", interval(s.Interval, DefaultHookTick), true, func(ctx context.Context) error {
		_, err := s.Firer.FireDue(ctx)
		return err
	})
}
