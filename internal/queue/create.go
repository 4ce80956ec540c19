package queue

import (
	"encoding/json"
	"strings"
	"time"
)

// CreateTaskInput is the createTask request body after schema validation and
// default filling.
type CreateTaskInput struct {
	TaskQueueID   string            `json:"taskQueueId"`
	ProvisionerID string            `json:"provisionerId"`
	WorkerType    string            `json:"workerType"`
	SchedulerID   string            `json:"schedulerId"`
	ProjectID     string            `json:"projectId"`
	TaskGroupID   string            `json:"taskGroupId"`
	Dependencies  []string          `json:"dependencies"`
	Requires      string            `json:"requires"`
	Routes        []string          `json:"routes"`
	Priority      string            `json:"priority"`
	Retries       *int              `json:"retries"`
	Created       Time              `json:"created"`
	Deadline      Time              `json:"deadline"`
	Expires       *Time             `json:"expires"`
	Scopes        []string          `json:"scopes"`
	Payload       json.RawMessage   `json:"payload"`
	Metadata      Metadata          `json:"metadata"`
	Tags          map[string]string `json:"tags"`
	Extra         json.RawMessage   `json:"extra"`
}

// NormalizeQueueIdentity applies docs/contract/queue.md §3.2: it settles taskQueueId,
// provisionerId and workerType, which callers may give in either form.
func (in *CreateTaskInput) NormalizeQueueIdentity() error {
	switch {
	case in.TaskQueueID != "" && in.ProvisionerID != "" && in.WorkerType != "":
		if in.TaskQueueID != in.ProvisionerID+"/"+in.WorkerType {
			return InputErrorf("taskQueueId %q must equal provisionerId/workerType %q", in.TaskQueueID, in.ProvisionerID+"/"+in.WorkerType)
		}
	case in.ProvisionerID != "" && in.WorkerType != "":
		in.TaskQueueID = in.ProvisionerID + "/" + in.WorkerType
	case in.TaskQueueID != "":
		in.ProvisionerID, in.WorkerType = SplitTaskQueueID(in.TaskQueueID)
	default:
		return InputErrorf("A task must have either taskQueueId or both provisionerId and workerType")
	}
	return nil
}

// BuildTask turns a validated input into the stored definition, applying the
// rules of docs/contract/queue.md §3.4 steps 2–7 (identity, defaults, date limits and
// scope shape). maxDependencies is the deployment's limit (at most
// MaxDependencies).
func BuildTask(taskID string, in CreateTaskInput, now time.Time, maxDependencies int) (*Task, error) {
	if err := in.NormalizeQueueIdentity(); err != nil {
		return nil, err
	}
	if maxDependencies <= 0 || maxDependencies > MaxDependencies {
		maxDependencies = MaxDependencies
	}
	if len(in.Dependencies) > maxDependencies {
		return nil, InputErrorf("too many dependencies: %d, the maximum is %d", len(in.Dependencies), maxDependencies)
	}
	if in.ProjectID == "" {
		in.ProjectID = "none"
	}
	if in.SchedulerID == "" {
		in.SchedulerID = "-"
	}
	if in.TaskGroupID == "" {
		in.TaskGroupID = taskID
	}
	if in.Requires == "" {
		in.Requires = RequiresAllCompleted
	}
	if in.Priority == "" || in.Priority == "normal" {
		in.Priority = "lowest"
	}
	retries := DefaultRetries
	if in.Retries != nil {
		retries = *in.Retries
	}
	if err := checkDates(&in, now); err != nil {
		return nil, err
	}
	for _, s := range in.Scopes {
		if strings.HasSuffix(s, "**") {
			return nil, InputErrorf("scopes must not end with `**`: %q", s)
		}
	}
	// Step 6 ends by canonicalising the dates, whatever precision or zone
	// the caller's Time values carry.
	t := &Task{
		ProvisionerID: in.ProvisionerID,
		WorkerType:    in.WorkerType,
		TaskQueueID:   in.TaskQueueID,
		SchedulerID:   in.SchedulerID,
		ProjectID:     in.ProjectID,
		TaskGroupID:   in.TaskGroupID,
		Dependencies:  nonNil(in.Dependencies),
		Requires:      in.Requires,
		Routes:        nonNil(in.Routes),
		Priority:      in.Priority,
		Retries:       retries,
		Created:       NewTime(in.Created.Time),
		Deadline:      NewTime(in.Deadline.Time),
		Expires:       NewTime(in.Expires.Time),
		Scopes:        nonNil(in.Scopes),
		Payload:       orEmptyObject(in.Payload),
		Metadata:      in.Metadata,
		Tags:          in.Tags,
		Extra:         orEmptyObject(in.Extra),
	}
	if t.Tags == nil {
		t.Tags = map[string]string{}
	}
	return t, nil
}

func checkDates(in *CreateTaskInput, now time.Time) error {
	switch {
	case in.Created.Before(now.Add(-CreatedDrift)):
		return InputErrorf("Created timestamp %s cannot be more than 15 minutes in the past", in.Created)
	case in.Created.After(now.Add(CreatedDrift)):
		return InputErrorf("Created timestamp %s cannot be more than 15 minutes in the future", in.Created)
	case in.Created.After(in.Deadline.Time):
		return InputErrorf("Deadline %s cannot be before created %s", in.Deadline, in.Created)
	case in.Deadline.Before(now):
		return InputErrorf("Deadline %s cannot be in the past", in.Deadline)
	case in.Deadline.After(now.Add(MaxDeadline + CreatedDrift)):
		return InputErrorf("Deadline %s cannot be more than 5 days into the future", in.Deadline)
	}
	if in.Expires == nil {
		e := NewTime(in.Deadline.AddDate(1, 0, 0))
		in.Expires = &e
	}
	if in.Expires.Before(in.Deadline.Time) {
		return InputErrorf("Expires %s cannot be before the deadline %s", in.Expires, in.Deadline)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}
