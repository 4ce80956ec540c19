package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/schema"
)

// What fired a hook: the JSON-e context's firedBy and the last fire's.
const (
	FiredBySchedule    = "schedule"
	FiredByTriggerHook = "triggerHook"
	FiredByToken       = "triggerHookWithToken"
	FiredByPulse       = "pulseMessage"
)

// Results of a fire, as listLastFires reports them.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// CheckTriggerPayload validates a trigger payload (triggerHook,
// triggerHookWithToken) against the hook's triggerSchema and checks an
// optional payload.taskId; it returns the taskId the payload asks for ("").
func CheckTriggerPayload(def *Definition, payload []byte) (string, error) {
	sch, err := CompileTriggerSchema(def.TriggerSchema)
	if err != nil {
		return "", err
	}
	if err := sch.Validate(payload); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			// ajv's sentences, as Taskcluster answers (callers match them).
			return "", inputError("%s", ve.TaskclusterSummary())
		}
		return "", inputError("%v", err)
	}
	var in struct {
		TaskID any `json:"taskId"`
	}
	if err := json.NewDecoder(bytes.NewReader(payload)).Decode(&in); err != nil {
		return "", inputError("decoding the payload: %v", err)
	}
	if in.TaskID == nil {
		return "", nil
	}
	id, ok := in.TaskID.(string)
	if !ok || !ident.ValidSlugID(id) {
		return "", inputError("Invalid taskId format: %v", in.TaskID)
	}
	return id, nil
}

// MessageMatches reports whether a Pulse message body may fire the hook:
// messages that do not match its triggerSchema are dropped.
func MessageMatches(def *Definition, body []byte) (bool, string) {
	sch, err := CompileTriggerSchema(def.TriggerSchema)
	if err != nil {
		return false, err.Error()
	}
	if err := sch.Validate(body); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// TaskError is the queue's refusal of a hook's createTask.
type TaskError struct {
	// Code, Status and Message are the queue's error (the message with
	// its footer); RequestInfo is the error body's requestInfo.
	Code        string
	Status      int
	Message     string
	RequestInfo map[string]any
}

// Record is the text a last fire keeps for the refusal: a JSON object
// like the one Taskcluster records (getHookStatus hands it back decoded).
func (e *TaskError) Record() string {
	body := map[string]any{"code": e.Code, "message": e.Message, "requestInfo": e.RequestInfo}
	b, _ := json.MarshalIndent(map[string]any{
		"name": "Error", "message": e.Message, "code": e.Code, "statusCode": e.Status, "body": body,
	}, "", "  ")
	return string(b)
}

// TriggerRefusal is the API error of a trigger whose createTask the queue
// refused: the role's missing scopes as InsufficientScopes, anything else
// as an InputError naming the queue's error.
func TriggerRefusal(def *Definition, e *TaskError) *Error {
	if e.Code == CodeInsufficientScopes {
		return &Error{Code: CodeInsufficientScopes,
			Message: fmt.Sprintf("The role `hook-id:%s/%s` does not have sufficient scopes to create the task:\n\n%s", def.HookGroupID, def.HookID, e.Message),
			Details: map[string]any{"createTask": e.RequestInfo}}
	}
	return inputError("While calling createTask: %s\n\n%s", e.Code, e.Message)
}

// RenderRefusal is the API error of a trigger whose template failed.
func RenderRefusal(err error) *Error {
	return inputError("While firing hook:\n\n%s", err.Error())
}

// RoleScope is the scope a hook's tasks are created with: the hook's role.
func RoleScope(hookGroupID, hookID string) string {
	return "assume:hook-id:" + hookGroupID + "/" + hookID
}
