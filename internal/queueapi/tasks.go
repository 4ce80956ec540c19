package queueapi

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

type statusResponse struct {
	Status queue.Status `json:"status"`
}

// loadTask loads a task or answers 404.
func (s *Server) loadTask(ctx context.Context, taskID string) (*queue.TaskState, error) {
	t, err := s.store.GetTask(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("Task `%s` not found", taskID)
	}
	return t, err
}

func (s *Server) getTask(c *api.Call) (any, error) {
	t, err := s.loadTask(c.Context(), c.Params["taskId"])
	if err != nil {
		return nil, err
	}
	return t.DefinitionBytes()
}

func (s *Server) getStatus(c *api.Call) (any, error) {
	t, err := s.loadTask(c.Context(), c.Params["taskId"])
	if err != nil {
		return nil, err
	}
	return statusResponse{t.Status()}, nil
}

// pageIDs pages over a list of ids by offset (the tasks and statuses
// methods page over the request's own list).
func pageIDs(ids []string, page store.Page) ([]string, string, error) {
	offset := 0
	if page.ContinuationToken != "" {
		n, err := strconv.Atoi(page.ContinuationToken)
		if err != nil || n < 0 {
			return nil, "", api.Errorf(api.CodeInputError, "Invalid continuationToken")
		}
		offset = n
	}
	limit := page.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	if offset >= len(ids) {
		return nil, "", nil
	}
	end := min(offset+limit, len(ids))
	next := ""
	if end < len(ids) {
		next = strconv.Itoa(end)
	}
	return ids[offset:end], next, nil
}

func (s *Server) taskIDsCall(c *api.Call) ([]*queue.TaskState, string, error) {
	var in struct {
		TaskIDs []string `json:"taskIds"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, "", err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"taskIds": in.TaskIDs}); err != nil {
		return nil, "", err
	}
	ids, next, err := pageIDs(in.TaskIDs, c.Page())
	if err != nil {
		return nil, "", err
	}
	tasks, err := s.store.GetTasks(c.Context(), ids)
	return tasks, next, err
}

func (s *Server) getTasks(c *api.Call) (any, error) {
	tasks, next, err := s.taskIDsCall(c)
	if err != nil {
		return nil, err
	}
	type entry struct {
		TaskID string     `json:"taskId"`
		Task   queue.Task `json:"task"`
	}
	out := struct {
		Tasks             []entry `json:"tasks"`
		ContinuationToken string  `json:"continuationToken,omitempty"`
	}{Tasks: []entry{}, ContinuationToken: next}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, entry{t.TaskID, t.Task})
	}
	return out, nil
}

func (s *Server) getStatuses(c *api.Call) (any, error) {
	tasks, next, err := s.taskIDsCall(c)
	if err != nil {
		return nil, err
	}
	type entry struct {
		TaskID string       `json:"taskId"`
		Status queue.Status `json:"status"`
	}
	out := struct {
		Statuses          []entry `json:"statuses"`
		ContinuationToken string  `json:"continuationToken,omitempty"`
	}{Statuses: []entry{}, ContinuationToken: next}
	for _, t := range tasks {
		out.Statuses = append(out.Statuses, entry{t.TaskID, t.Status()})
	}
	return out, nil
}

type taskAndStatus struct {
	Status queue.Status `json:"status"`
	Task   queue.Task   `json:"task"`
}

func taskList(tasks []*queue.TaskState) []taskAndStatus {
	out := make([]taskAndStatus, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, taskAndStatus{t.Status(), t.Task})
	}
	return out
}

func (s *Server) listDependentTasks(c *api.Call) (any, error) {
	taskID := c.Params["taskId"]
	if _, err := s.loadTask(c.Context(), taskID); err != nil {
		return nil, err
	}
	tasks, next, err := s.store.ListDependents(c.Context(), taskID, c.Page())
	if err != nil {
		return nil, err
	}
	return struct {
		TaskID            string          `json:"taskId"`
		Tasks             []taskAndStatus `json:"tasks"`
		ContinuationToken string          `json:"continuationToken,omitempty"`
	}{taskID, taskList(tasks), next}, nil
}

func (s *Server) createTask(c *api.Call) (any, error) {
	t, err := s.createTaskFrom(c.Context(), c.Params["taskId"], c.Input, c.Now, func(params map[string]any) error {
		return c.Authorize(c.Route.Scopes, params)
	})
	if err != nil {
		return nil, err
	}
	return statusResponse{t.Status()}, nil
}

// createTaskFrom creates a task from a validated createTask body; authorize
// checks the createTask scope expression with the body's parameters. It
// serves the createTask route and CreateTaskAs.
func (s *Server) createTaskFrom(ctx context.Context, taskID string, input []byte, now time.Time, authorize func(params map[string]any) error) (*queue.TaskState, error) {
	var in queue.CreateTaskInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, api.Errorf(api.CodeInputValidationError, "decoding request body: %v", err)
	}
	if err := in.NormalizeQueueIdentity(); err != nil {
		return nil, err
	}
	if len(in.Dependencies) > s.cfg.MaxDependencies {
		return nil, queue.InputErrorf("too many dependencies: %d, the maximum is %d", len(in.Dependencies), s.cfg.MaxDependencies)
	}
	if in.ProjectID == "" {
		in.ProjectID = "none"
	}
	priority := in.Priority
	if priority == "" || priority == "normal" {
		priority = "lowest"
	}
	if err := authorize(map[string]any{
		"scopes": orEmpty(in.Scopes), "routes": orEmpty(in.Routes), "projectId": in.ProjectID,
		"schedulerId": orDefault(in.SchedulerID, "-"), "priorities": queue.PrioritiesAtOrAbove(priority),
		"provisionerId": in.ProvisionerID, "workerType": in.WorkerType,
	}); err != nil {
		return nil, err
	}
	def, err := queue.BuildTask(taskID, in, now, s.cfg.MaxDependencies)
	if err != nil {
		return nil, err
	}
	if def.Flow, err = flowPolicy(def); err != nil {
		return nil, err
	}
	res, err := s.store.CreateTask(ctx, store.CreateTaskParams{TaskID: taskID, Task: def, Now: now})
	if err != nil {
		return nil, err
	}
	s.publish(ctx, res.Changes)
	return res.Task, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// schedulerParams renders the parameters of the scheduleTask, rerunTask
// and cancelTask scope templates from the stored task.
func schedulerParams(t *queue.TaskState) map[string]any {
	return map[string]any{
		"taskId": t.TaskID, "schedulerId": t.Task.SchedulerID, "taskGroupId": t.Task.TaskGroupID, "projectId": t.Task.ProjectID,
	}
}

// transitionCall loads the task (404), authorizes with its fields, then
// applies the transition in one transaction.
func (s *Server) transitionCall(c *api.Call, apply func(*queue.TaskState, *queue.Transition, time.Time) error) (any, error) {
	t, err := s.loadTask(c.Context(), c.Params["taskId"])
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, schedulerParams(t)); err != nil {
		return nil, err
	}
	res, err := s.store.UpdateTask(c.Context(), store.UpdateTaskParams{TaskID: t.TaskID, Now: c.Now,
		Apply: func(t *queue.TaskState, tr *queue.Transition) error { return apply(t, tr, c.Now) }})
	if err != nil {
		return nil, err
	}
	s.publish(c.Context(), res.Changes)
	return statusResponse{res.Task.Status()}, nil
}

func (s *Server) scheduleTask(c *api.Call) (any, error) {
	return s.transitionCall(c, func(t *queue.TaskState, tr *queue.Transition, now time.Time) error { return t.Schedule(now, tr) })
}

func (s *Server) rerunTask(c *api.Call) (any, error) {
	return s.transitionCall(c, func(t *queue.TaskState, tr *queue.Transition, now time.Time) error { return t.Rerun(now, tr) })
}

func (s *Server) cancelTask(c *api.Call) (any, error) {
	return s.transitionCall(c, func(t *queue.TaskState, tr *queue.Transition, now time.Time) error { return t.Cancel(now, tr) })
}

func (s *Server) publish(ctx context.Context, changes []store.Change) {
	if len(changes) == 0 {
		return
	}
	if s.metrics != nil {
		s.metrics.ObserveChanges(changes)
	}
	if s.pub != nil {
		s.pub.PublishChanges(ctx, changes)
	}
}

// Publish hands changes made outside a request (background resolvers) to
// the same publisher and metrics as API calls.
func (s *Server) Publish(ctx context.Context, changes []store.Change) { s.publish(ctx, changes) }

type groupResponse struct {
	TaskGroupID string      `json:"taskGroupId"`
	SchedulerID string      `json:"schedulerId"`
	Expires     queue.Time  `json:"expires"`
	Sealed      *queue.Time `json:"sealed,omitempty"`
}

func groupJSON(g *store.TaskGroup) groupResponse {
	out := groupResponse{TaskGroupID: g.TaskGroupID, SchedulerID: g.SchedulerID, Expires: queue.NewTime(g.Expires)}
	if g.Sealed != nil {
		t := queue.NewTime(*g.Sealed)
		out.Sealed = &t
	}
	return out
}

func (s *Server) loadGroup(ctx context.Context, id string) (*store.TaskGroup, error) {
	g, err := s.store.GetTaskGroup(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("No task-group with taskGroupId: `%s`", id)
	}
	return g, err
}

func (s *Server) getTaskGroup(c *api.Call) (any, error) {
	g, err := s.loadGroup(c.Context(), c.Params["taskGroupId"])
	if err != nil {
		return nil, err
	}
	return groupJSON(g), nil
}

func (s *Server) listTaskGroup(c *api.Call) (any, error) {
	g, err := s.loadGroup(c.Context(), c.Params["taskGroupId"])
	if err != nil {
		return nil, err
	}
	tasks, next, err := s.store.ListTaskGroup(c.Context(), g.TaskGroupID, c.Page())
	if err != nil {
		return nil, err
	}
	return struct {
		groupResponse
		Tasks             []taskAndStatus `json:"tasks"`
		ContinuationToken string          `json:"continuationToken,omitempty"`
	}{groupJSON(g), taskList(tasks), next}, nil
}

func (s *Server) sealTaskGroup(c *api.Call) (any, error) {
	g, err := s.loadGroup(c.Context(), c.Params["taskGroupId"])
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"schedulerId": g.SchedulerID, "taskGroupId": g.TaskGroupID}); err != nil {
		return nil, err
	}
	g, err = s.store.SealTaskGroup(c.Context(), g.TaskGroupID, c.Now)
	if err != nil {
		return nil, err
	}
	if gp, ok := s.pub.(GroupPublisher); ok && s.pub != nil {
		gp.PublishGroupSealed(c.Context(), g)
	}
	return groupJSON(g), nil
}

// GroupPublisher is implemented by publishers that announce sealed groups.
type GroupPublisher interface {
	PublishGroupSealed(ctx context.Context, g *store.TaskGroup)
}

func (s *Server) cancelTaskGroup(c *api.Call) (any, error) {
	g, err := s.loadGroup(c.Context(), c.Params["taskGroupId"])
	if err != nil {
		return nil, err
	}
	if g.Sealed == nil {
		return nil, queue.Conflictf("Task group %s must be sealed before it can be cancelled", g.TaskGroupID)
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"schedulerId": g.SchedulerID, "taskGroupId": g.TaskGroupID}); err != nil {
		return nil, err
	}
	res, err := s.store.CancelTaskGroup(c.Context(), g.TaskGroupID, c.Now)
	if err != nil {
		return nil, err
	}
	s.publish(c.Context(), res.Changes)
	return map[string]any{
		"taskGroupId": g.TaskGroupID, "taskGroupSize": res.GroupSize, "cancelledCount": len(res.Canceled), "taskIds": orEmpty(res.Canceled),
	}, nil
}

// decodeLenient parses an optional JSON body of a method without an input
// schema (reportCompleted's legacy {"success": false}).
func decodeLenient(body []byte, v any) {
	if len(body) > 0 {
		_ = json.Unmarshal(body, v)
	}
}
