package queue

import (
	"time"
)

// Event kinds, named after Taskcluster's task exchanges.
const (
	EventTaskDefined   = "task-defined"
	EventTaskPending   = "task-pending"
	EventTaskRunning   = "task-running"
	EventTaskCompleted = "task-completed"
	EventTaskFailed    = "task-failed"
	EventTaskException = "task-exception"
)

// Event records that a transition happened. The store attaches the status
// as of after the whole change when it publishes.
type Event struct {
	Kind        string
	RunID       int // -1 when the event concerns no run (task-defined, or a run-less exception)
	WorkerGroup string
	WorkerID    string
	TakenUntil  *Time
	// Status is the task status the event announces. The store fills it in
	// once the whole change is known (for task-defined: the status before
	// the first run was added).
	Status *Status
}

// Transition is a mutation of a task that may emit events.
type Transition struct {
	Events []Event
}

func (tr *Transition) emit(e Event) { tr.Events = append(tr.Events, e) }

func runEvent(kind string, r *Run) Event {
	return Event{Kind: kind, RunID: r.RunID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID}
}

func (t *TaskState) deadlinePassed(now time.Time) bool {
	return !t.Task.Deadline.After(now)
}

func (t *TaskState) addRun(state, reasonCreated string, now time.Time) *Run {
	t.Runs = append(t.Runs, Run{
		RunID:         len(t.Runs),
		State:         state,
		ReasonCreated: reasonCreated,
		Scheduled:     NewTime(now),
	})
	return &t.Runs[len(t.Runs)-1]
}

func (t *TaskState) run(runID int) (*Run, error) {
	if runID < 0 || runID >= len(t.Runs) {
		return nil, NotFoundf("Run %d not found on task %s", runID, t.TaskID)
	}
	return &t.Runs[runID], nil
}

// Schedule gives an unscheduled task its first pending run, whatever its
// dependencies say (transition 1 via scheduleTask). A task that already has
// runs is left alone.
func (t *TaskState) Schedule(now time.Time, tr *Transition) error {
	if t.deadlinePassed(now) {
		return Conflictf("Task %s Can't be scheduled past it's deadline of %s", t.TaskID, t.Task.Deadline)
	}
	t.scheduleIfUnscheduled(now, tr)
	return nil
}

// scheduleIfUnscheduled adds run 0 pending when there are no runs; used by
// createTask and dependency resolution as well.
func (t *TaskState) scheduleIfUnscheduled(now time.Time, tr *Transition) bool {
	if len(t.Runs) != 0 {
		return false
	}
	r := t.addRun(StatePending, ReasonScheduled, now)
	tr.emit(Event{Kind: EventTaskPending, RunID: r.RunID})
	return true
}

// DependenciesSatisfied schedules a task whose last dependency was just
// satisfied: only if it still has no runs and its deadline has not passed.
func (t *TaskState) DependenciesSatisfied(now time.Time, tr *Transition) bool {
	if t.deadlinePassed(now) {
		return false
	}
	return t.scheduleIfUnscheduled(now, tr)
}

// Rerun adds a new pending run to a task that is unscheduled or resolved
// (transitions 2 and 13) and resets its retry budget.
func (t *TaskState) Rerun(now time.Time, tr *Transition) error {
	if t.deadlinePassed(now) {
		return Conflictf("Task %s can't be rerun past its deadline of %s", t.TaskID, t.Task.Deadline)
	}
	switch t.State() {
	case StatePending, StateRunning:
		return nil // idempotent: a run is already in flight
	}
	if len(t.Runs) >= MaxRuns {
		return Conflictf("Maximum number of runs reached (%d)", MaxRuns)
	}
	lastRunID := len(t.Runs) - 1
	t.RetriesLeft = min(t.Task.Retries, MaxRuns-2-lastRunID)
	r := t.addRun(StatePending, ReasonRerun, now)
	tr.emit(Event{Kind: EventTaskPending, RunID: r.RunID})
	return nil
}

// Cancel resolves the task exception/canceled (transitions 3 and 11).
// Resolved tasks are left as they are.
func (t *TaskState) Cancel(now time.Time, tr *Transition) error {
	if t.deadlinePassed(now) {
		return Conflictf("Task %s can't be cancelled past its deadline of %s", t.TaskID, t.Task.Deadline)
	}
	t.resolveAsException(ReasonCanceled, now, tr)
	return nil
}

// resolveAsException ends an unscheduled, pending or running task with an
// exception that is never retried (cancel, deadline).
func (t *TaskState) resolveAsException(reason string, now time.Time, tr *Transition) bool {
	switch t.State() {
	case StateUnscheduled:
		r := t.addRun(StateException, ReasonException, now)
		r.ReasonResolved = reason
		resolved := NewTime(now)
		r.Resolved = &resolved
		tr.emit(Event{Kind: EventTaskException, RunID: r.RunID})
		return true
	case StatePending, StateRunning:
		r := t.LastRun()
		r.State = StateException
		r.ReasonResolved = reason
		resolved := NewTime(now)
		r.Resolved = &resolved
		ev := runEvent(EventTaskException, r)
		if reason == ReasonDeadlineExceeded {
			// The deadline sweep announces only the run: no worker is
			// resolving it (docs/contract/queue.md §9).
			ev.WorkerGroup, ev.WorkerID = "", ""
		}
		tr.emit(ev)
		return true
	}
	return false
}

// Claim makes a pending run running for a worker (transition 5). The worker
// already holding the run may repeat the call (its first answer may have
// been lost on the way back, and client libraries retry by themselves): the
// repeat changes nothing and emits nothing, and the caller answers the same
// claim again. Any other worker is refused with a conflict. (That a worker
// never runs one run twice is the worker's own bookkeeping: hopper's worker
// refuses to hold a run it already holds.)
func (t *TaskState) Claim(runID int, workerGroup, workerID string, now, takenUntil time.Time, tr *Transition) error {
	if t.deadlinePassed(now) {
		return Conflictf("Task %s can't be claimed past its deadline of %s", t.TaskID, t.Task.Deadline)
	}
	r, err := t.run(runID)
	if err != nil {
		return err
	}
	if runID != len(t.Runs)-1 {
		return Conflictf("Run %d of task %s is not the last run", runID, t.TaskID)
	}
	until := NewTime(takenUntil)
	switch {
	case r.State == StatePending:
		started := NewTime(now)
		r.State = StateRunning
		r.WorkerGroup = workerGroup
		r.WorkerID = workerID
		r.TakenUntil = &until
		r.Started = &started
		ev := runEvent(EventTaskRunning, r)
		ev.TakenUntil = &until
		tr.emit(ev)
		return nil
	case r.State == StateRunning && r.WorkerGroup == workerGroup && r.WorkerID == workerID:
		return nil
	}
	return Conflictf("Run %d of task %s is %s and cannot be claimed", runID, t.TaskID, r.State)
}

// Reclaim extends a running run's takenUntil (transition 6). It never moves
// takenUntil backwards.
func (t *TaskState) Reclaim(runID int, now, takenUntil time.Time) error {
	r, err := t.run(runID)
	if err != nil {
		return err
	}
	if t.deadlinePassed(now) {
		return Conflictf("Task %s can't be reclaimed past its deadline of %s", t.TaskID, t.Task.Deadline)
	}
	if runID != len(t.Runs)-1 || r.State != StateRunning {
		return Conflictf("Run %d of task %s is not running (state %s); it cannot be reclaimed", runID, t.TaskID, r.State)
	}
	until := NewTime(takenUntil)
	if r.TakenUntil == nil || until.After(r.TakenUntil.Time) {
		r.TakenUntil = &until
	}
	return nil
}

// ReportCompleted resolves a running run completed (transition 7).
// Repeating it on a run already completed succeeds without change.
func (t *TaskState) ReportCompleted(runID int, now time.Time, tr *Transition) error {
	return t.reportFinal(runID, StateCompleted, ReasonCompleted, EventTaskCompleted, now, tr)
}

// ReportFailed resolves a running run failed (transition 8).
func (t *TaskState) ReportFailed(runID int, now time.Time, tr *Transition) error {
	return t.reportFinal(runID, StateFailed, ReasonFailed, EventTaskFailed, now, tr)
}

func (t *TaskState) reportFinal(runID int, state, reason, event string, now time.Time, tr *Transition) error {
	r, err := t.run(runID)
	if err != nil {
		return err
	}
	if r.State == state && r.ReasonResolved == reason && runID == len(t.Runs)-1 {
		return nil // idempotent repeat
	}
	if r.State != StateRunning || runID != len(t.Runs)-1 {
		return Conflictf("Run %d of task %s is %s; only a running run can be reported %s", runID, t.TaskID, r.State, state)
	}
	r.State = state
	r.ReasonResolved = reason
	resolved := NewTime(now)
	r.Resolved = &resolved
	tr.emit(runEvent(event, r))
	return nil
}

// retryReason tells whether an exception reason retries, and how the new
// run is labelled.
func retryReason(reason string) (string, bool) {
	switch reason {
	case ReasonWorkerShutdown, ReasonClaimExpired:
		return ReasonRetry, true
	case ReasonIntermittentTask:
		return ReasonTaskRetry, true
	}
	return "", false
}

// ReportException resolves a running run exception with a worker-given reason
// (transition 9), adding a retry run for worker-shutdown and
// intermittent-task while retries remain.
func (t *TaskState) ReportException(runID int, reason string, now time.Time, tr *Transition) error {
	reason = NormalizeExceptionReason(reason)
	r, err := t.run(runID)
	if err != nil {
		return err
	}
	if r.State == StateException && r.ReasonResolved == reason && len(t.Runs)-1-runID <= 1 {
		return nil // idempotent repeat
	}
	if r.State != StateRunning || runID != len(t.Runs)-1 {
		return Conflictf("Run %d of task %s is %s; only a running run can be reported exception", runID, t.TaskID, r.State)
	}
	t.resolveRunException(r, reason, now, tr)
	return nil
}

// resolveRunException resolves the (running) last run exception and retries
// when the reason allows it and the budget remains.
func (t *TaskState) resolveRunException(r *Run, reason string, now time.Time, tr *Transition) {
	r.State = StateException
	r.ReasonResolved = reason
	resolved := NewTime(now)
	r.Resolved = &resolved
	tr.emit(runEvent(EventTaskException, r))
	created, retries := retryReason(reason)
	if retries && t.RetriesLeft > 0 && len(t.Runs) < MaxRuns {
		t.RetriesLeft--
		nr := t.addRun(StatePending, created, now)
		tr.emit(Event{Kind: EventTaskPending, RunID: nr.RunID})
	}
}

// ExpireClaim resolves a running run whose claim ran out (transition 10). It
// acts only if takenUntil still equals the claim being expired, the time has
// come, and the deadline has not passed (past-deadline runs are left to
// ExpireDeadline). It reports whether anything changed.
func (t *TaskState) ExpireClaim(takenUntil, now time.Time, tr *Transition) bool {
	r := t.LastRun()
	if r == nil || r.State != StateRunning || r.TakenUntil == nil {
		return false
	}
	if !r.TakenUntil.Equal(NewTime(takenUntil).Time) || now.Before(r.TakenUntil.Time) {
		return false
	}
	if t.deadlinePassed(now) {
		return false
	}
	t.resolveRunException(r, ReasonClaimExpired, now, tr)
	return true
}

// ExpireDeadline resolves a task that is still unscheduled, pending or running
// once its deadline has passed (transitions 4 and 12). Never retried.
func (t *TaskState) ExpireDeadline(now time.Time, tr *Transition) bool {
	if !t.deadlinePassed(now) {
		return false
	}
	return t.resolveAsException(ReasonDeadlineExceeded, now, tr)
}

// DependencySatisfied reports whether a dependency in state depState
// satisfies a dependent with the given requires rule.
func DependencySatisfied(requires, depState string) bool {
	switch depState {
	case StateCompleted:
		return true
	case StateFailed, StateException:
		return requires == RequiresAllResolved
	}
	return false
}

// BecameResolved reports whether a change from before to after resolved the
// task anew (so dependents and the task group must be re-examined).
func BecameResolved(before, after *TaskState) bool {
	if !after.IsResolved() {
		return false
	}
	return !before.IsResolved() || len(before.Runs) != len(after.Runs)
}

// ArtifactUploadAllowed reports whether artifacts may still be created for a
// run: while it runs, or within the grace period after an exception.
func ArtifactUploadAllowed(r *Run, now time.Time) bool {
	switch r.State {
	case StateRunning:
		return true
	case StateException:
		return r.Resolved != nil && now.Before(r.Resolved.Add(ArtifactGraceAfterException))
	}
	return false
}
