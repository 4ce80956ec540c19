// Package workerpool holds the Worker Manager's background duties: the
// provisioner (Provisioner: each dynamic pool's capacity kept between its
// minimum and maximum for the work pending), the worker scanner
// (WorkerScanner: what runs each worker checked, deadlines and idleness
// enforced, expired records deleted) and the resolution of a stopped
// worker's claimed runs (WorkerRunResolver). Each is a pass
// (RunOnce/Pass) over narrow store interfaces with an injected clock;
// internal/maintenance only schedules them (maintenance.Every), and the
// composition root wires them (internal/server/workermanager.go).
package workerpool

import (
	"context"
	"log/slog"

	"github.com/hopper-ci/hopper/internal/store"
)

// Publisher receives the changes a duty committed to the queue's tasks,
// in order, to publish their events (queueapi.Server.Publish).
type Publisher interface {
	Publish(ctx context.Context, changes []store.Change)
}

// logger returns l, or a logger that discards when l is nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
