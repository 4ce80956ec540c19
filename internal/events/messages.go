package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MessageVersion is the "version" of every message body; the constructors
// set it, whatever the caller left in the field.
const MessageVersion = 1

// timestampLayout is Taskcluster's timestamp form: UTC with exactly three
// fractional digits, as JavaScript's Date.prototype.toJSON prints it.
const timestampLayout = "2006-01-02T15:04:05.000Z"

// Timestamp is a point in time that marshals in Taskcluster's form
// ("2024-01-01T00:20:00.000Z"). The zero Timestamp is omitted from bodies
// where the field is optional.
type Timestamp struct{ time.Time }

// MarshalJSON renders the timestamp in UTC with millisecond precision.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(timestampLayout) + `"`), nil
}

// UnmarshalJSON accepts any RFC 3339 date-time, so that consumers of the bus
// can decode bodies they receive.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Timestamp{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timestamp must be a string: %w", err)
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("parsing timestamp %q: %w", s, err)
	}
	*t = Timestamp{parsed.UTC()}
	return nil
}

// TaskSummary is the subset of the task definition that task messages carry.
type TaskSummary struct {
	// Tags are the task's tags; the constructors turn nil into {} because
	// the schema requires an object.
	Tags map[string]string `json:"tags"`
}

// ArtifactSummary describes the artifact of an artifact-created message. The
// schema allows exactly these four fields (no contentLength, even where the
// API's artifact object has one).
type ArtifactSummary struct {
	StorageType string    `json:"storageType"`
	Name        string    `json:"name"`
	Expires     Timestamp `json:"expires"`
	ContentType string    `json:"contentType"`
}

// TaskMessage is the body of the task exchanges (task-defined, task-pending,
// task-running, artifact-created, task-completed, task-failed and
// task-exception). Which optional fields must or must not be set depends on
// the exchange; NewTaskEvent enforces it.
type TaskMessage struct {
	Version int `json:"version"`
	// Status is the task status structure as of after the change, already
	// serialised by the queue.
	Status json.RawMessage `json:"status"`
	// Task is {tags}; all task exchanges but artifact-created may carry it.
	Task *TaskSummary `json:"task,omitempty"`
	// RunID is the run the message is about.
	RunID *int `json:"runId,omitempty"`
	// WorkerGroup and WorkerID identify the worker that claimed the run.
	WorkerGroup string `json:"workerGroup,omitempty"`
	WorkerID    string `json:"workerId,omitempty"`
	// TakenUntil is the claim's deadline (task-running only).
	TakenUntil Timestamp `json:"takenUntil,omitzero"`
	// Artifact is the created artifact (artifact-created only).
	Artifact *ArtifactSummary `json:"artifact,omitempty"`
}

// TaskGroupMessage is the body of task-group-resolved and task-group-sealed.
type TaskGroupMessage struct {
	Version     int       `json:"version"`
	TaskGroupID string    `json:"taskGroupId"`
	SchedulerID string    `json:"schedulerId"`
	Expires     Timestamp `json:"expires"`
	// Sealed is when the group was sealed; omitted for an unsealed group.
	Sealed Timestamp `json:"sealed,omitzero"`
}

// TaskPriorityChangedMessage is the body of task-priority-changed.
type TaskPriorityChangedMessage struct {
	Version     int             `json:"version"`
	Status      json.RawMessage `json:"status"`
	OldPriority string          `json:"oldPriority"`
	NewPriority string          `json:"newPriority"`
}

// TaskGroupPriorityChangedMessage is the body of task-group-priority-changed.
type TaskGroupPriorityChangedMessage struct {
	Version       int    `json:"version"`
	TaskGroupID   string `json:"taskGroupId"`
	SchedulerID   string `json:"schedulerId"`
	NewPriority   string `json:"newPriority"`
	TasksAffected int    `json:"tasksAffected"`
}

// presence says whether a body field is forbidden, optional or required on
// an exchange. The Taskcluster schemas set additionalProperties to false, so
// a field that does not belong is as much an error as a missing one.
type presence int8

const (
	forbidden presence = iota
	optional
	required
)

// taskBodyRule lists which optional TaskMessage fields an exchange takes.
type taskBodyRule struct {
	runID, worker, takenUntil, artifact, task presence
}

func taskBodyRuleFor(exchange string) (taskBodyRule, bool) {
	switch exchange {
	case ExchangeTaskDefined:
		return taskBodyRule{task: optional}, true
	case ExchangeTaskPending:
		return taskBodyRule{runID: required, task: optional}, true
	case ExchangeTaskRunning:
		return taskBodyRule{runID: required, worker: required, takenUntil: required, task: optional}, true
	case ExchangeArtifactCreated:
		return taskBodyRule{runID: required, worker: required, artifact: required}, true
	case ExchangeTaskCompleted, ExchangeTaskFailed:
		return taskBodyRule{runID: required, worker: required, task: optional}, true
	case ExchangeTaskException:
		// Worker fields only when the run had been claimed; no runId at all
		// when the deadline passed before any run existed.
		return taskBodyRule{runID: optional, worker: optional, task: optional}, true
	}
	return taskBodyRule{}, false
}

func (r taskBodyRule) check(exchange string, b TaskMessage) error {
	var errs []error
	field := func(name string, p presence, present bool) {
		switch {
		case p == required && !present:
			errs = append(errs, fmt.Errorf("%s message requires %s", exchange, name))
		case p == forbidden && present:
			errs = append(errs, fmt.Errorf("%s message does not allow %s", exchange, name))
		}
	}
	field("runId", r.runID, b.RunID != nil)
	field("workerGroup", r.worker, b.WorkerGroup != "")
	field("workerId", r.worker, b.WorkerID != "")
	if r.worker == optional && (b.WorkerGroup == "") != (b.WorkerID == "") {
		errs = append(errs, fmt.Errorf("%s message needs both workerGroup and workerId or neither", exchange))
	}
	field("takenUntil", r.takenUntil, !b.TakenUntil.IsZero())
	field("artifact", r.artifact, b.Artifact != nil)
	field("task", r.task, b.Task != nil)
	return errors.Join(errs...)
}

// statusKey holds the fields of a task status that the routing key uses.
type statusKey struct {
	TaskID        string `json:"taskId"`
	ProvisionerID string `json:"provisionerId"`
	WorkerType    string `json:"workerType"`
	TaskQueueID   string `json:"taskQueueId"`
	SchedulerID   string `json:"schedulerId"`
	TaskGroupID   string `json:"taskGroupId"`
}

// keyPartsFromStatus reads the routing-key words out of a serialised task
// status, so that the key can never disagree with the body it routes.
func keyPartsFromStatus(status json.RawMessage) (TaskKeyParts, error) {
	if len(status) == 0 {
		return TaskKeyParts{}, errors.New("message has no status")
	}
	var st statusKey
	if err := json.Unmarshal(status, &st); err != nil {
		return TaskKeyParts{}, fmt.Errorf("reading task status: %w", err)
	}
	if (st.ProvisionerID == "" || st.WorkerType == "") && st.TaskQueueID != "" {
		// provisionerId/workerType are the halves of taskQueueId.
		if prov, wt, ok := strings.Cut(st.TaskQueueID, "/"); ok {
			st.ProvisionerID, st.WorkerType = prov, wt
		}
	}
	return TaskKeyParts{
		TaskID:        st.TaskID,
		ProvisionerID: st.ProvisionerID,
		WorkerType:    st.WorkerType,
		SchedulerID:   st.SchedulerID,
		TaskGroupID:   st.TaskGroupID,
	}, nil
}

// NewTaskEvent builds the message of one of the task exchanges from its body
// and the task's routes. The routing key is derived from body.Status (taskId,
// provisionerId, workerType, schedulerId, taskGroupId) and from body's runId,
// workerGroup and workerId; each route becomes a "route.<route>" CC. The body
// must carry exactly the fields the exchange's schema allows.
func NewTaskEvent(exchange string, body TaskMessage, routes []string) (Message, error) {
	rule, ok := taskBodyRuleFor(exchange)
	if !ok {
		return Message{}, fmt.Errorf("%q is not a task exchange", exchange)
	}
	if err := rule.check(exchange, body); err != nil {
		return Message{}, err
	}
	body.Version = MessageVersion
	if body.Task != nil && body.Task.Tags == nil {
		// Copy rather than write through the caller's pointer.
		body.Task = &TaskSummary{Tags: map[string]string{}}
	}
	parts, err := keyPartsFromStatus(body.Status)
	if err != nil {
		return Message{}, fmt.Errorf("building %s message: %w", exchange, err)
	}
	parts.RunID, parts.WorkerGroup, parts.WorkerID = body.RunID, body.WorkerGroup, body.WorkerID
	return newTaskKeyedMessage(exchange, parts, routes, body)
}

// NewTaskPriorityChangedEvent builds a task-priority-changed message, routed
// like the other task exchanges (without run or worker words).
func NewTaskPriorityChangedEvent(body TaskPriorityChangedMessage, routes []string) (Message, error) {
	const exchange = ExchangeTaskPriorityChanged
	if body.OldPriority == "" || body.NewPriority == "" {
		return Message{}, fmt.Errorf("%s message requires oldPriority and newPriority", exchange)
	}
	body.Version = MessageVersion
	parts, err := keyPartsFromStatus(body.Status)
	if err != nil {
		return Message{}, fmt.Errorf("building %s message: %w", exchange, err)
	}
	return newTaskKeyedMessage(exchange, parts, routes, body)
}

func newTaskKeyedMessage(exchange string, parts TaskKeyParts, routes []string, body any) (Message, error) {
	if err := parts.Validate(); err != nil {
		return Message{}, fmt.Errorf("building %s routing key: %w", exchange, err)
	}
	for _, r := range routes {
		if r == "" {
			return Message{}, fmt.Errorf("building %s message: empty task route", exchange)
		}
	}
	return newMessage(exchange, TaskRoutingKey(parts), RouteCCs(routes), body)
}

// NewTaskGroupEvent builds a task-group-resolved or task-group-sealed
// message. Group messages have no CCs.
func NewTaskGroupEvent(exchange string, body TaskGroupMessage) (Message, error) {
	if exchange != ExchangeTaskGroupResolved && exchange != ExchangeTaskGroupSealed {
		return Message{}, fmt.Errorf("%q is not a task-group exchange", exchange)
	}
	if body.Expires.IsZero() {
		return Message{}, fmt.Errorf("%s message requires expires", exchange)
	}
	body.Version = MessageVersion
	return newGroupKeyedMessage(exchange, body.TaskGroupID, body.SchedulerID, body)
}

// NewTaskGroupPriorityChangedEvent builds a task-group-priority-changed
// message.
func NewTaskGroupPriorityChangedEvent(body TaskGroupPriorityChangedMessage) (Message, error) {
	const exchange = ExchangeTaskGroupPriorityChanged
	if body.NewPriority == "" {
		return Message{}, fmt.Errorf("%s message requires newPriority", exchange)
	}
	if body.TasksAffected < 0 {
		return Message{}, fmt.Errorf("%s message has negative tasksAffected %d", exchange, body.TasksAffected)
	}
	body.Version = MessageVersion
	return newGroupKeyedMessage(exchange, body.TaskGroupID, body.SchedulerID, body)
}

func newGroupKeyedMessage(exchange, taskGroupID, schedulerID string, body any) (Message, error) {
	if err := validateGroupKey(taskGroupID, schedulerID); err != nil {
		return Message{}, fmt.Errorf("building %s routing key: %w", exchange, err)
	}
	return newMessage(exchange, GroupRoutingKey(taskGroupID, schedulerID), nil, body)
}

func newMessage(exchange, key string, cc []string, body any) (Message, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return Message{}, fmt.Errorf("encoding %s message body: %w", exchange, err)
	}
	m := Message{Exchange: exchange, RoutingKey: key, CC: cc, Body: raw}
	if err := m.Validate(); err != nil {
		return Message{}, err
	}
	return m, nil
}
