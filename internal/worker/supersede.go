package worker

import (
	"context"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// SupersedeRequest is what the superseding step gets: the initial claim
// (whose reclaimer already runs) and the worker, whose HoldClaim starts
// reclaimers for any further claims it obtains and whose Queue claims tasks
// with the worker's own credentials.
type SupersedeRequest struct {
	// Initial is the claim the worker got from claimWork (T0).
	Initial *Claim
	// SupersederURL is the initial task's payload.supersederUrl, read from
	// the raw payload before validation.
	SupersederURL string
	// Worker gives access to HoldClaim, Queue and Config.
	Worker *Worker
}

// SupersedeResult tells the worker which task to run.
type SupersedeResult struct {
	// Primary is the claim whose task is run; nil means Initial.
	Primary *Claim
	// Secondaries, if non-nil, holds the other claims; the worker calls its
	// Finish once the primary's outcome is known. It may be nil.
	Secondaries SecondarySet
	// LogLines are written (as info lines) to the primary's task log once
	// it exists, e.g. the superseder's reply and the claim attempts.
	LogLines []string
	// Warnings are written as warning lines to the primary's log.
	Warnings []string
}

// SecondarySet is the set of claims superseded by the primary. The worker
// does not resolve them itself; it hands the primary's outcome to Finish.
type SecondarySet interface {
	// Finish resolves the secondaries according to the primary's outcome
	// (docs/contract/worker.md §5.6). It is called exactly once: after the primary's
	// payload artifacts and logs were uploaded and before the primary is
	// resolved, or — when the primary's claim was lost — instead of that.
	// It must stop the secondaries' reclaimers.
	Finish(ctx context.Context, primary *Claim, outcome Outcome)
}

// SupersedeFunc is the superseding step (docs/contract/worker.md §5): it runs after the
// claim and before preparing, may swap the primary task and returns the
// secondary claims to resolve later. An error means "run the initial task
// alone" and is logged as a warning in the task log.
type SupersedeFunc func(ctx context.Context, req SupersedeRequest) (SupersedeResult, error)

// Outcome is how a run ended, as the superseding step needs to know it.
type Outcome struct {
	// State is tcclient.StateCompleted, StateFailed or StateException, or
	// "" when the claim was lost (Lost is then true).
	State string
	// Reason is the exception reason for StateException.
	Reason string
	// Aborted is true when the task code was stopped by the worker rather
	// than ending on its own (maxRunTime, shutdown, lost claim).
	Aborted bool
	// Lost is true when the primary's claim was lost (reclaim 409 etc.).
	Lost bool
}

// TaskCodeConcluded reports whether the primary's task code ran to a
// conclusion: completed, failed by exit code or missing artifact, or
// intermittent-task (docs/contract/worker.md §5.6 case A).
func (o Outcome) TaskCodeConcluded() bool {
	if o.Lost || o.Aborted {
		return false
	}
	switch o.State {
	case tcclient.StateCompleted, tcclient.StateFailed:
		return true
	case tcclient.StateException:
		return o.Reason == tcclient.ReasonIntermittentTask
	}
	return false
}
