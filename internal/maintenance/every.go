package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// Every schedules a service's own duty: Pass every Interval, and once at
// start, until stopped. The duty's logic lives in its service's package
// (notifysend.Sender's Drain, …); this package only runs it.
type Every struct {
	// What names the duty in the log when a pass fails.
	What     string
	Interval time.Duration
	Pass     func(ctx context.Context) error
	Logger   *slog.Logger
	loop
}

var _ Service = (*Every)(nil)

// Start implements Service.
func (e *Every) Start(ctx context.Context) {
	e.start(ctx, e.Logger, e.What, e.Interval, true, e.Pass)
}
