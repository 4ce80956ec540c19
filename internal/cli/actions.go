package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/jsone"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// InteractiveActionName is the in-tree action a decision task declares for
// "create interactive task" (Treeherder's button; taskgraph names it so).
const InteractiveActionName = "create-interactive"

// actionsFile is a decision task's public/actions.json (Taskcluster's
// actions spec, version 1): what may be done to the tasks of its group.
type actionsFile struct {
	Version   int              `json:"version"`
	Variables map[string]any   `json:"variables"`
	Actions   []declaredAction `json:"actions"`
}

type declaredAction struct {
	Name    string              `json:"name"`
	Kind    string              `json:"kind"`
	Context []map[string]string `json:"context"`
	// kind task: the action task's template.
	Task any `json:"task"`
	// kind hook: the hook fired and its payload's template.
	HookGroupID string `json:"hookGroupId"`
	HookID      string `json:"hookId"`
	HookPayload any    `json:"hookPayload"`
}

// errNoAction means the task's group declares no interactive action: the
// caller copies the task itself.
var errNoAction = errors.New("no create-interactive action declared")

// interactiveAction finds the create-interactive action that applies to
// task in the actions.json of its group's decision task (whose taskId is
// the group's, by the convention decision tasks follow); errNoAction when
// there is none.
func (a *app) interactiveAction(ctx context.Context, task *tcclient.TaskDefinition) (*declaredAction, *actionsFile, error) {
	ref, err := a.client.GetLatestArtifact(ctx, task.TaskGroupID, "public/actions.json")
	if err != nil {
		if code := tcclient.StatusCode(err); code == http.StatusNotFound || code == http.StatusFailedDependency {
			return nil, nil, errNoAction
		}
		return nil, nil, failure("reading the actions of task group "+task.TaskGroupID, err)
	}
	body, err := a.open(ctx, ref.URL)
	if err != nil {
		return nil, nil, err
	}
	defer body.Close()
	var f actionsFile
	if err := json.NewDecoder(io.LimitReader(body, 8<<20)).Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("reading public/actions.json of task %s: %w", task.TaskGroupID, err)
	}
	if f.Version != 1 {
		return nil, nil, fmt.Errorf("public/actions.json of task %s is version %d; hopper reads version 1", task.TaskGroupID, f.Version)
	}
	for i := range f.Actions {
		act := &f.Actions[i]
		if act.Name == InteractiveActionName && (act.Kind == "task" || act.Kind == "hook") && taskInContext(act.Context, task.Tags) {
			return act, &f, nil
		}
	}
	return nil, nil, errNoAction
}

// taskInContext reports whether tags match one of the action's tag sets
// (an action with no tag sets is for the group, not for a task).
func taskInContext(sets []map[string]string, tags map[string]string) bool {
	for _, set := range sets {
		all := true
		for k, v := range set {
			if tags[k] != v {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// runAction triggers act for taskID (task) as the actions spec says: the
// task kind creates the rendered action task with the decision task's
// scopes as authorizedScopes; the hook kind fires the hook with the
// rendered payload, once the decision task's scopes show it may
// (in-tree:hook-action:<hookGroupId>/<hookId>). It returns the taskId it
// created or the hook fired.
func (a *app) runAction(ctx context.Context, act *declaredAction, f *actionsFile, taskID string, task json.RawMessage, groupID string) (string, error) {
	decision, err := a.client.Task(ctx, groupID)
	if err != nil {
		return "", failure("reading decision task "+groupID, err)
	}
	var taskValue any
	if err := json.Unmarshal(task, &taskValue); err != nil {
		return "", fmt.Errorf("reading task %s: %w", taskID, err)
	}
	context := map[string]any{}
	for k, v := range f.Variables {
		context[k] = v
	}
	context["taskGroupId"], context["taskId"], context["input"] = groupID, taskID, map[string]any{}
	switch act.Kind {
	case "task":
		ownID := ident.NewSlugID()
		context["task"], context["ownTaskId"] = taskValue, ownID
		def, err := jsone.Render(act.Task, context)
		if err != nil {
			return "", fmt.Errorf("rendering the %s action's task: %w", act.Name, err)
		}
		c := *a.client
		c.AuthorizedScopes = decision.Scopes
		if _, err := c.CreateTaskDocument(ctx, ownID, def); err != nil {
			return "", failure("creating the "+act.Name+" action task", err)
		}
		return ownID, nil
	default:
		held, err := a.client.ExpandScopes(ctx, decision.Scopes)
		if err != nil {
			return "", failure("expanding the decision task's scopes", err)
		}
		if need := "in-tree:hook-action:" + act.HookGroupID + "/" + act.HookID; !scopeHeld(held, need) {
			return "", &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("the %s action is misconfigured: decision task %s does not have %s", act.Name, groupID, need)}
		}
		payload, err := jsone.Render(act.HookPayload, context)
		if err != nil {
			return "", fmt.Errorf("rendering the %s action's hook payload: %w", act.Name, err)
		}
		res, err := a.client.TriggerHook(ctx, act.HookGroupID, act.HookID, payload)
		if err != nil {
			return "", failure("firing hook "+act.HookGroupID+"/"+act.HookID, err)
		}
		return res.TaskID, nil
	}
}

// scopeHeld reports whether held satisfies required (exactly, or by a
// scope ending in * that prefixes it).
func scopeHeld(held []string, required string) bool {
	for _, s := range held {
		if s == required || strings.HasSuffix(s, "*") && strings.HasPrefix(required, strings.TrimSuffix(s, "*")) {
			return true
		}
	}
	return false
}
