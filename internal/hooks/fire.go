package hooks

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/jsone"
	"github.com/hopper-ci/hopper/internal/queue"
)

// Default task times when a template leaves them out (Taskcluster fills
// them the same way; "1 month" is 30 days there).
const (
	defaultDeadline = 24 * time.Hour
	defaultExpires  = 30 * 24 * time.Hour
)

// Fire describes one firing of a hook.
type Fire struct {
	// FiredBy is one of the FiredBy* constants.
	FiredBy string
	// TaskID is the task to create (and the default taskGroupId).
	TaskID string
	// Payload is the trigger payload or Pulse message body, decoded as
	// encoding/json decodes into any; nil for scheduled fires, whose
	// context has no payload.
	Payload any
	// ClientID is who called triggerHook ("" otherwise).
	ClientID string
	// Now is the fire's time: the due time for a scheduled fire (so that
	// repeating it renders the same task), the clock's time otherwise.
	// JSON-e's $fromNow counts from it.
	Now time.Time
}

// RenderTask renders a hook's task template for a fire and completes the
// task definition the way Taskcluster does: created, deadline and expires
// default to now, now + 1 day and now + 30 days, and taskGroupId to the
// taskId. It returns nil, nil when the template renders to null (the hook
// declines to create a task). A template that fails to render, or renders
// to something other than an object, is an error whose text is what the
// last fire records.
func RenderTask(def *Definition, f Fire) (map[string]any, error) {
	var template any
	if err := json.Unmarshal(def.Task, &template); err != nil {
		return nil, fmt.Errorf("decoding the task template: %w", err)
	}
	now := f.Now.UTC()
	// JSON-e's own `now` is the fire's time (RenderAt sets it).
	ctx := map[string]any{"firedBy": f.FiredBy, "taskId": f.TaskID}
	if f.Payload != nil {
		ctx["payload"] = f.Payload
	}
	if f.ClientID != "" {
		ctx["clientId"] = f.ClientID
	}
	out, err := jsone.RenderAt(template, ctx, now)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, nil
	}
	task, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the task template must render to an object or null, got %s", jsonType(out))
	}
	if falsy(task["created"]) {
		task["created"] = queue.NewTime(now).String()
	}
	if falsy(task["deadline"]) {
		task["deadline"] = queue.NewTime(now.Add(defaultDeadline)).String()
	}
	if falsy(task["expires"]) {
		task["expires"] = queue.NewTime(now.Add(defaultExpires)).String()
	}
	if falsy(task["taskGroupId"]) {
		task["taskGroupId"] = f.TaskID
	}
	return task, nil
}

// falsy is JavaScript's idea of a value that is not there.
func falsy(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case float64:
		return x == 0
	case json.Number:
		return x == "0"
	}
	return false
}

func jsonType(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
