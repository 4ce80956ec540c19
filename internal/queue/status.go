package queue

import "encoding/json"

// Task and run states.
const (
	StateUnscheduled = "unscheduled"
	StatePending     = "pending"
	StateRunning     = "running"
	StateCompleted   = "completed"
	StateFailed      = "failed"
	StateException   = "exception"
)

// Reasons a run was created.
const (
	ReasonScheduled = "scheduled"
	ReasonRetry     = "retry"
	ReasonTaskRetry = "task-retry"
	ReasonRerun     = "rerun"
	ReasonException = "exception"
)

// Reasons a run was resolved.
const (
	ReasonCompleted           = "completed"
	ReasonFailed              = "failed"
	ReasonDeadlineExceeded    = "deadline-exceeded"
	ReasonCanceled            = "canceled"
	ReasonClaimExpired        = "claim-expired"
	ReasonWorkerShutdown      = "worker-shutdown"
	ReasonMalformedPayload    = "malformed-payload"
	ReasonResourceUnavailable = "resource-unavailable"
	ReasonInternalError       = "internal-error"
	ReasonIntermittentTask    = "intermittent-task"
	ReasonSuperseded          = "superseded"
)

// ExceptionReasons are the reasons a worker may report with reportException.
var ExceptionReasons = []string{
	ReasonWorkerShutdown, ReasonMalformedPayload, ReasonResourceUnavailable,
	ReasonInternalError, ReasonIntermittentTask, ReasonSuperseded,
}

// NormalizeExceptionReason maps the seed documents' spelling
// "resources-unavailable" onto the schema's "resource-unavailable".
func NormalizeExceptionReason(reason string) string {
	if reason == "resources-unavailable" {
		return ReasonResourceUnavailable
	}
	return reason
}

// Run is one attempt at a task.
type Run struct {
	RunID          int    `json:"runId"`
	State          string `json:"state"`
	ReasonCreated  string `json:"reasonCreated"`
	ReasonResolved string `json:"reasonResolved,omitempty"`
	WorkerGroup    string `json:"workerGroup,omitempty"`
	WorkerID       string `json:"workerId,omitempty"`
	TakenUntil     *Time  `json:"takenUntil,omitempty"`
	Scheduled      Time   `json:"scheduled"`
	Started        *Time  `json:"started,omitempty"`
	Resolved       *Time  `json:"resolved,omitempty"`
}

// IsResolved reports whether the run has reached a final state.
func (r *Run) IsResolved() bool {
	switch r.State {
	case StateCompleted, StateFailed, StateException:
		return true
	}
	return false
}

// Status is the task status structure of the status endpoint.
type Status struct {
	TaskID        string `json:"taskId"`
	ProvisionerID string `json:"provisionerId"`
	WorkerType    string `json:"workerType"`
	TaskQueueID   string `json:"taskQueueId"`
	SchedulerID   string `json:"schedulerId"`
	ProjectID     string `json:"projectId"`
	TaskGroupID   string `json:"taskGroupId"`
	Priority      string `json:"priority"`
	Deadline      Time   `json:"deadline"`
	Expires       Time   `json:"expires"`
	RetriesLeft   int    `json:"retriesLeft"`
	State         string `json:"state"`
	Runs          []Run  `json:"runs"`
}

// TaskState is the aggregate the state machine works on: a definition, its
// retry budget and its runs. The store loads it, a transition mutates it, and
// the store saves it, all in one transaction.
type TaskState struct {
	TaskID      string
	Task        Task
	RetriesLeft int
	Runs        []Run
	// DefinitionJSON, when set by the store, is Task as stored (the JSON
	// encoding of Task, which never changes once created), so replies can
	// carry it without encoding the definition again.
	DefinitionJSON string
}

// DefinitionBytes returns the task's definition as JSON: the stored
// encoding when known, else Task encoded.
func (t *TaskState) DefinitionBytes() (json.RawMessage, error) {
	if t.DefinitionJSON != "" {
		return json.RawMessage(t.DefinitionJSON), nil
	}
	return json.Marshal(&t.Task)
}

// NewTaskState returns a freshly created task: no runs, full retry budget.
func NewTaskState(taskID string, def Task) *TaskState {
	return &TaskState{TaskID: taskID, Task: def, RetriesLeft: def.Retries}
}

// State is the task's state: that of its last run, or unscheduled.
func (t *TaskState) State() string {
	if len(t.Runs) == 0 {
		return StateUnscheduled
	}
	return t.Runs[len(t.Runs)-1].State
}

// LastRun returns the last run, or nil if there is none.
func (t *TaskState) LastRun() *Run {
	if len(t.Runs) == 0 {
		return nil
	}
	return &t.Runs[len(t.Runs)-1]
}

// IsResolved reports whether the last run is completed, failed or exception.
func (t *TaskState) IsResolved() bool {
	r := t.LastRun()
	return r != nil && r.IsResolved()
}

// Status renders the status structure. The runs slice is copied so the
// result stays valid if the state changes later.
func (t *TaskState) Status() Status {
	runs := make([]Run, len(t.Runs))
	copy(runs, t.Runs)
	return Status{
		TaskID:        t.TaskID,
		ProvisionerID: t.Task.ProvisionerID,
		WorkerType:    t.Task.WorkerType,
		TaskQueueID:   t.Task.TaskQueueID,
		SchedulerID:   t.Task.SchedulerID,
		ProjectID:     t.Task.ProjectID,
		TaskGroupID:   t.Task.TaskGroupID,
		Priority:      t.Task.Priority,
		Deadline:      t.Task.Deadline,
		Expires:       t.Task.Expires,
		RetriesLeft:   t.RetriesLeft,
		State:         t.State(),
		Runs:          runs,
	}
}

// Clone returns a deep copy, so the store can compare before and after.
func (t *TaskState) Clone() *TaskState {
	c := *t
	c.Runs = make([]Run, len(t.Runs))
	copy(c.Runs, t.Runs)
	return &c
}
