package superseding

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// The superseding step as the worker calls it. The worker imports this
// package and runs Step.Run after a claim and before preparing the task;
// this package knows the worker only through Host and Claim, so the
// dependency points one way.

// Claim is a run the worker holds, its reclaimer running (worker.Claim).
type Claim interface {
	// Ref names the claimed run.
	Ref() TaskRef
	// Definition is the task's definition from the claim.
	Definition() *tcclient.TaskDefinition
	// Queue is a client signing with the claim's current credentials.
	Queue() *tcclient.Client
	// Lost is closed when the claim is lost; LostReason then says why.
	Lost() <-chan struct{}
	LostReason() error
	// StopReclaiming stops the claim's reclaimer.
	StopReclaiming()
}

// Host is the worker as the superseding step uses it.
type Host interface {
	// Queue is a client signing with the worker's own credentials.
	Queue() *tcclient.Client
	// CheckClaim checks the structural fields of a claimTask answer.
	CheckClaim(tc *tcclient.TaskClaim) error
	// HoldClaim holds a claimed run: its reclaimer starts at once. A run
	// the worker already holds is refused.
	HoldClaim(tc tcclient.TaskClaim) (Claim, error)
	// HTTPClient performs artifact uploads (nil: the default client).
	HTTPClient() *http.Client
}

// Settings are the worker's superseding settings (docs/contract/worker.md
// §5.2) and identity.
type Settings struct {
	// Order is "ascending" or Descending.
	Order string
	// Timeout bounds the superseder request.
	Timeout time.Duration
	// MaxTasks caps the list length.
	MaxTasks int
	// AllowedURLPrefixes, when non-empty, is the allow-list of superseder
	// URLs.
	AllowedURLPrefixes []string
	// RunIDZeroOnly claims only run 0 of the listed tasks.
	RunIDZeroOnly bool
	// The worker's task queue and identity, which listed tasks must share
	// and their claims name.
	TaskQueueID, WorkerGroup, WorkerID string
	// UserAgent names the worker in the superseder request.
	UserAgent string
}

// Request is what the superseding step gets: the initial claim (whose
// reclaimer already runs), the task's supersederUrl (read from the raw
// payload before validation), the worker and its settings.
type Request struct {
	Initial       Claim
	SupersederURL string
	Host          Host
	Settings      Settings
}

// Result tells the worker which task to run.
type Result struct {
	// Primary is the claim whose task is run; nil means Initial. It is
	// Initial or a claim Host.HoldClaim returned.
	Primary Claim
	// Secondaries, if non-nil, holds the other claims; the worker calls its
	// Finish once the primary's outcome is known.
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
	// (docs/contract/worker.md §5.6). It is called exactly once: after the
	// primary's payload artifacts and logs were uploaded and before the
	// primary is resolved, or — when the primary's claim was lost —
	// instead of that. It stops the secondaries' reclaimers.
	Finish(ctx context.Context, primary Claim, outcome Outcome)
}

// Outcome is how a run ended, as the superseding step needs to know it
// (worker.Outcome).
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

// Options tune the step. The zero value is ready to use.
type Options struct {
	// Logger receives what happens to the secondaries after the primary's
	// log was uploaded (nil: discard).
	Logger *slog.Logger
	// Transport performs the superseder request (nil: the default
	// transport). The request never carries credentials.
	Transport http.RoundTripper
	// Concurrency bounds claims and resolutions in flight (default 8).
	Concurrency int
}

// Step is the worker-side superseding step (docs/contract/worker.md
// §5.2–5.7).
type Step struct{ opts Options }

// New returns the step.
func New(opts Options) *Step {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = defaultConcurrency
	}
	return &Step{opts: opts}
}

// Run runs the step for one initial claim. An error means "run the
// initial task alone" and is logged as a warning in the task log.
func (s *Step) Run(ctx context.Context, req Request) (Result, error) {
	f := &flow{opts: s.opts, req: req, cfg: req.Settings, w: req.Host}
	return f.run(ctx)
}

// AnnounceAllowList says once, when a worker starts, which superseders its
// tasks may make it call: a task's supersederUrl is fetched by the worker,
// so without superseding.allowedUrlPrefixes any task author chooses a URL
// the worker's network can reach.
func AnnounceAllowList(log *slog.Logger, enabled bool, allowedURLPrefixes []string) {
	switch {
	case !enabled:
		log.Info("superseding is disabled")
	case len(allowedURLPrefixes) == 0:
		log.Warn("superseding: tasks may name any superseder URL; set superseding.allowedUrlPrefixes (--superseder-allow) to restrict them")
	default:
		log.Info("superseding: tasks may name only superseders under the allowed prefixes; others run alone", "allowedUrlPrefixes", allowedURLPrefixes)
	}
}

// PayloadURL reads payload.supersederUrl leniently from a raw payload
// (before validation, docs/contract/worker.md §5.2): the worker to decide
// whether to supersede, the step to check a listed task.
func PayloadURL(raw json.RawMessage) string {
	var loose struct {
		URL any `json:"supersederUrl"`
	}
	if json.Unmarshal(raw, &loose) != nil {
		return ""
	}
	s, _ := loose.URL.(string)
	return s
}
