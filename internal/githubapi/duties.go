package githubapi

import (
	"context"
	"time"
)

// The service's duties, which internal/server schedules with
// maintenance.Every on every replica: ProcessPass (the stored webhook
// deliveries) and Report (builds moved on, statuses, check runs and
// comments sent) every DefaultTick and at once when Kick says a delivery
// was stored or a message queued; InstallationsPass at start and every
// DefaultInstallationsInterval. Each item is leased to one replica, so
// passes on several replicas, or a kicked one beside a ticked one, may
// overlap.
const (
	// DefaultTick is how often the deliveries and reports are looked at
	// when nothing kicked them.
	DefaultTick = time.Second
	// DefaultInstallationsInterval is how often the Apps' installations
	// are listed again (Taskcluster's syncInstallations runs daily).
	DefaultInstallationsInterval = 24 * time.Hour
)

// ProcessPass is ProcessDue as a duty's pass.
func (s *Service) ProcessPass(ctx context.Context) error {
	_, err := s.ProcessDue(ctx)
	return err
}

// InstallationsPass is SyncInstallations as a duty's pass, which logs
// how many installations it recorded: an installation whose delivery was
// missed becomes known. Recording one again changes nothing.
func (s *Service) InstallationsPass(ctx context.Context) error {
	n, err := s.SyncInstallations(ctx)
	if n > 0 {
		s.Log.Info("GitHub App installations recorded", "count", n)
	}
	return err
}
