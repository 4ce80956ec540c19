// Package workerprovider starts and stops the workers of dynamic worker
// pools on the engines they run on. A Provider is four calls — start a
// worker, check that it still runs, stop it, and say how much room an
// engine has — so that the provisioner and the worker scanner
// (internal/maintenance) work the same whatever runs the workers: Docker
// daemons here; Kubernetes Pods, Nomad jobs or a cloud's instances would
// be the same four calls (docs/worker-pools.md).
package workerprovider

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hopper-ci/hopper/internal/workermanager"
)

// Registration is what a started worker needs to register: the Worker
// Manager's root URL and the one-time secret it presents.
type Registration struct {
	RootURL      string
	StaticSecret string
}

// Status is what a check finds of a worker.
type Status struct {
	// Running says something still runs the worker.
	Running bool
	// NotStarted says nothing was started for the worker yet: its start
	// may still be under way (the provisioner records a worker before it
	// starts what runs it), so it is not a worker that died.
	NotStarted bool
	// Exited says it ran and ended; ExitCode is how (0: it stopped on its
	// own, as an idle worker does).
	Exited   bool
	ExitCode int
	// Detail says what was found, for pool errors.
	Detail string
}

// Provider runs the workers of pools of one provider type.
type Provider interface {
	// Start starts the worker (already recorded as requested) and returns
	// the provider's record of it, kept as the worker's ProviderData.
	Start(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker, reg Registration) (json.RawMessage, error)
	// Check looks at what runs the worker; a worker whose resources are
	// gone is neither running nor exited, one whose resources were never
	// made is NotStarted.
	Check(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker) (Status, error)
	// Stop stops the worker and removes its resources, those of a start
	// that was not recorded included; stopping a worker that is gone is
	// no error.
	Stop(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker) error
}

// ErrNoRoom says every engine of the pool is full.
var ErrNoRoom = errors.New("every host of the pool is at its maxContainers")
