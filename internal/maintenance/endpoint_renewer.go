package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// EndpointRenewals is what EndpointRenewer renews: the leases of the
// connections this replica holds in the shared directory (hop.Directory).
type EndpointRenewals interface {
	Renew(ctx context.Context) error
}

// EndpointRenewer renews, every Interval, the directory rows saying which
// worker tunnels and interactive agents this replica holds, so viewers on
// other replicas find them, and rows of a replica that died run out.
type EndpointRenewer struct {
	loop
	Endpoints EndpointRenewals
	Interval  time.Duration
	Logger    *slog.Logger
}

// Start begins renewing in the background.
func (r *EndpointRenewer) Start(ctx context.Context) {
	r.start(ctx, r.Logger, "renewing the replica's connection leases", r.Interval, false, r.Endpoints.Renew)
}
