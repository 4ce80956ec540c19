package queueapi

import (
	"context"
	"fmt"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// CreateTaskAs creates a task for another hopper service the way that
// service's own createTask call would: body is a createTask request body,
// validated against its schema, and the createTask scope expression must
// be satisfied by scopes (the already expanded scopes the call is made
// with) instead of an HTTP caller's. clientID names the caller in
// InsufficientScopes messages. The queue's own rules apply unchanged
// (an identical repeat succeeds, a different one conflicts) and the
// task's events are published. A refusal is an *api.Refusal; other errors are
// internal.
func (s *Server) CreateTaskAs(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
	now := s.clock.Now()
	refuse := func(err error) error {
		apiErr := api.AsError(err)
		if apiErr == nil {
			return err
		}
		return api.NewRefusal(apiErr, "createTask", map[string]string{"taskId": taskID}, body, now)
	}
	if !ident.ValidSlugID(taskID) {
		return nil, refuse(api.InvalidParam("taskId", taskID, ident.SlugID()))
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
		return api.AuthError(caller.Authorize(required))
	})
	if err != nil {
		return nil, refuse(err)
	}
	return t, nil
}

// transitionScopes is the scope expression of a task transition a
// scheduler may make (scheduleTask, rerunTask, cancelTask).
func transitionScopes(verb string) string {
	return api.AnyOf(
		api.Scope("queue:"+verb+":<schedulerId>/<taskGroupId>/<taskId>"),
		api.Scope("queue:"+verb+"-in-project:<projectId>"),
		api.AllOf(api.Scope("queue:"+verb), api.Scope("assume:scheduler-id:<schedulerId>/<taskGroupId>")),
	)
}

// RerunTaskAs reruns a task for another hopper service the way that
// service's own rerunTask call would: the rerunTask scope expression must
// be satisfied by scopes (already expanded); clientID names the caller in
// InsufficientScopes messages. The queue's rules apply unchanged and the
// task's events are published. A refusal is an *api.Error.
func (s *Server) RerunTaskAs(ctx context.Context, taskID, clientID string, scopes []string) (*queue.TaskState, error) {
	t, err := s.loadTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	tmpl, err := auth.ParseTemplate([]byte(transitionScopes("rerun-task")))
	if err != nil {
		return nil, fmt.Errorf("parsing the rerunTask scope template: %w", err)
	}
	required, ok, err := tmpl.Render(schedulerParams(t))
	if err != nil {
		return nil, fmt.Errorf("rendering the rerunTask scope expression: %w", err)
	}
	if ok {
		caller := &auth.Result{ClientID: clientID, Scopes: auth.Normalize(scopes), HasCredentials: true, Scheme: auth.SchemeHawk}
		if err := api.AuthError(caller.Authorize(required)); err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	res, err := s.store.UpdateTask(ctx, store.UpdateTaskParams{TaskID: taskID, Now: now,
		Apply: func(t *queue.TaskState, tr *queue.Transition) error { return t.Rerun(now, tr) }})
	if err != nil {
		return nil, err
	}
	s.publish(ctx, res.Changes)
	return res.Task, nil
}
