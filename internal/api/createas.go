package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/slugid"
)

// Refusal is a createTask error as a caller of the Queue API would have
// received it: Taskcluster's code, status, message (with its footer) and
// requestInfo.
type Refusal struct {
	Code        string
	Status      int
	Message     string
	RequestInfo map[string]any
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// CreateTaskAs creates a task for another hopper service the way that
// service's own createTask call would: body is a createTask request body,
// validated against its schema, and the createTask scope expression must
// be satisfied by scopes (the already expanded scopes the call is made
// with) instead of an HTTP caller's. clientID names the caller in
// InsufficientScopes messages. The queue's own rules apply unchanged
// (an identical repeat succeeds, a different one conflicts) and the
// task's events are published. A refusal is a *Refusal; other errors are
// internal.
func (s *Server) CreateTaskAs(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
	now := s.clock.Now()
	refuse := func(err error) error {
		apiErr := toAPIError(err)
		if apiErr == nil {
			return err
		}
		return refusal(apiErr, "createTask", map[string]string{"taskId": taskID}, body, now)
	}
	if !slugid.Valid(taskID) {
		return nil, refuse(InvalidParam("taskId", taskID, slugid.Regexp()))
	}
	input, err := s.schemas.Validate("create-task-request", body)
	if err != nil {
		return nil, refuse(err)
	}
	tmpl, err := auth.ParseTemplate([]byte(createTaskScopes))
	if err != nil {
		return nil, fmt.Errorf("parsing the createTask scope template: %w", err)
	}
	caller := &auth.Result{ClientID: clientID, Scopes: auth.Normalize(scopes), HasCredentials: true, Scheme: auth.SchemeHawk}
	t, err := s.createTaskFrom(ctx, taskID, input, now, func(params map[string]any) error {
		required, ok, err := tmpl.Render(params)
		if err != nil {
			return fmt.Errorf("rendering the createTask scope expression: %w", err)
		}
		if !ok {
			return nil
		}
		return authError(caller.Authorize(required))
	})
	if err != nil {
		return nil, refuse(err)
	}
	return t, nil
}

// refusal renders an API error as its body would read.
func refusal(e *Error, method string, params map[string]string, payload []byte, now time.Time) *Refusal {
	body := errorResponse(e, method, params, json.RawMessage(payload), now)
	info := map[string]any{}
	raw, _ := json.Marshal(body.RequestInfo)
	_ = json.Unmarshal(raw, &info)
	return &Refusal{Code: e.Code, Status: e.Status(), Message: body.Message, RequestInfo: info}
}
