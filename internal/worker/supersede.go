package worker

import (
	"context"
	"net/http"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
)

// The superseding step (docs/contract/worker.md §5, package superseding)
// runs after a claim and before preparing: it may swap the primary task
// and returns the secondary claims to resolve once the primary's outcome
// is known. The worker calls it; it knows the worker only through
// superseding.Host and superseding.Claim, which the worker implements
// here.

// Outcome is how a run ended; the superseding step decides from it what
// becomes of the runs the primary superseded.
type Outcome = superseding.Outcome

// supersedeStep runs the superseding step for one claim (superseding.Step
// by default; the worker's tests put their own).
type supersedeStep func(ctx context.Context, req superseding.Request) (superseding.Result, error)

// SupersedingRequest is the superseding step's request for an initial
// claim whose payload names supersederURL: the worker's settings and
// identity, and the worker as the step's Host.
func (w *Worker) SupersedingRequest(initial *Claim, supersederURL string) superseding.Request {
	s := w.cfg.Superseding
	return superseding.Request{Initial: initial, SupersederURL: supersederURL, Host: supersedingHost{w},
		Settings: superseding.Settings{Order: s.Order, Timeout: s.Timeout.Duration, MaxTasks: s.MaxTasks,
			AllowedURLPrefixes: s.AllowedURLPrefixes, RunIDZeroOnly: s.RunIDZeroOnly,
			TaskQueueID: w.cfg.TaskQueueID, WorkerGroup: w.cfg.WorkerGroup, WorkerID: w.cfg.WorkerID, UserAgent: Version}}
}

// supersedingHost is the worker as the superseding step uses it.
type supersedingHost struct{ w *Worker }

var _ superseding.Host = supersedingHost{}

func (h supersedingHost) Queue() *tcclient.Client { return h.w.Queue() }

func (h supersedingHost) CheckClaim(tc *tcclient.TaskClaim) error { return ValidateClaim(tc) }

func (h supersedingHost) HoldClaim(tc tcclient.TaskClaim) (superseding.Claim, error) {
	c, err := h.w.HoldClaim(tc)
	if err != nil {
		return nil, err // not a nil *Claim in a non-nil interface
	}
	return c, nil
}

func (h supersedingHost) HTTPClient() *http.Client { return h.w.HTTPClient }

var _ superseding.Claim = (*Claim)(nil)

// Ref implements superseding.Claim.
func (c *Claim) Ref() superseding.TaskRef {
	return superseding.TaskRef{TaskID: c.TaskID, RunID: c.RunID}
}

// Definition implements superseding.Claim.
func (c *Claim) Definition() *tcclient.TaskDefinition { return &c.Task }
