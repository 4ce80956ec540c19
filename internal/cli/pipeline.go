package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// A pipeline file holds several tasks, keyed by a label, under "tasks";
// "needs" lists the labels a task waits for, which become its
// dependencies once every task has its taskId. Every other top-level key
// is a default for each task (a task's own value wins), so a queue,
// routes or an owner are written once:
//
//	taskQueueId: hopper/default
//	tasks:
//	  build: {payload: {command: [[make]], maxRunTime: 600}}
//	  test:  {needs: [build], payload: {command: [[make, test]], maxRunTime: 600}}
//
// The tasks are created as one task group, dependencies first, so a team
// without a forge integration runs a multi-step build without pasting
// taskIds.

// maxPipelineTasks bounds a pipeline file (a task group has no limit, but
// a file of thousands of tasks is a generator's job, not a hand's).
const maxPipelineTasks = 1000

// isPipeline reports whether a task file is a pipeline file.
func isPipeline(doc map[string]any) bool {
	_, hasTasks := doc["tasks"]
	_, hasPayload := doc["payload"]
	return hasTasks && !hasPayload
}

// pipelineTask is one task of a pipeline, ready to create.
type pipelineTask struct {
	label  string
	taskID string
	doc    map[string]any
}

// planPipeline turns a pipeline document into its tasks in creation order
// (every task after the tasks it needs; labels in lexical order among
// equals), with defaults filled in, taskIds chosen, one taskGroupId and
// each "needs" turned into dependencies.
func planPipeline(name string, doc map[string]any, d Defaults) (string, []pipelineTask, error) {
	rawTasks, ok := doc["tasks"].(map[string]any)
	if !ok || len(rawTasks) == 0 {
		return "", nil, usagef("%s: tasks must be a mapping of labels to task definitions, e.g. tasks: {build: {payload: …}}", name)
	}
	if len(rawTasks) > maxPipelineTasks {
		return "", nil, usagef("%s: %d tasks; a pipeline file holds at most %d", name, len(rawTasks), maxPipelineTasks)
	}
	shared := maps.Clone(doc)
	delete(shared, "tasks")
	groupID, _ := shared["taskGroupId"].(string)
	if groupID == "" {
		groupID = tcclient.NewTaskID()
	} else if err := checkTaskID("taskGroupId", groupID); err != nil {
		return "", nil, err
	}
	shared["taskGroupId"] = groupID

	needs := map[string][]string{}
	tasks := map[string]map[string]any{}
	for label, raw := range rawTasks {
		def, ok := raw.(map[string]any)
		if !ok {
			return "", nil, usagef("%s: task %q must be a mapping (a task definition), not %s", name, label, kindOf(raw))
		}
		if strings.TrimSpace(label) == "" {
			return "", nil, usagef("%s: a task label must not be empty", name)
		}
		merged := withDefaults(def, shared)
		if merged["taskGroupId"] != groupID {
			return "", nil, usagef("%s: task %q names another taskGroupId; a pipeline is one task group", name, label)
		}
		list, err := labelList(merged["needs"])
		if err != nil {
			return "", nil, usagef("%s: task %q: needs: %v", name, label, err)
		}
		delete(merged, "needs")
		for _, n := range list {
			if _, ok := rawTasks[n]; !ok {
				return "", nil, usagef("%s: task %q needs %q, which is not a task of this file (its tasks: %s)", name, label, n, strings.Join(slices.Sorted(maps.Keys(rawTasks)), ", "))
			}
			if n == label {
				return "", nil, usagef("%s: task %q needs itself", name, label)
			}
		}
		needs[label] = list
		tasks[label] = merged
	}
	order, err := creationOrder(needs)
	if err != nil {
		return "", nil, usagef("%s: %v", name, err)
	}

	ids := map[string]string{}
	out := make([]pipelineTask, 0, len(order))
	for _, label := range order {
		def := tasks[label]
		taskD := d
		taskD.Name = label
		taskD.Description = d.Description + " (task " + label + ")"
		taskID, err := FillDefaults(def, taskD)
		if err != nil {
			var exit *ExitError
			if ok := asExit(err, &exit); ok {
				exit.Msg = fmt.Sprintf("%s: task %q: %s", name, label, exit.Msg)
			}
			return "", nil, err
		}
		ids[label] = taskID
		deps, err := labelList(def["dependencies"])
		if err != nil {
			return "", nil, usagef("%s: task %q: dependencies: %v", name, label, err)
		}
		for _, n := range needs[label] {
			deps = append(deps, ids[n])
		}
		if len(deps) > 0 {
			list := make([]any, len(deps))
			for i, id := range deps {
				list[i] = id
			}
			def["dependencies"] = list
		}
		out = append(out, pipelineTask{label: label, taskID: taskID, doc: def})
	}
	seen := map[string]string{}
	for _, t := range out {
		if other, dup := seen[t.taskID]; dup {
			return "", nil, usagef("%s: tasks %q and %q have the same taskId %s", name, other, t.label, t.taskID)
		}
		seen[t.taskID] = t.label
	}
	return groupID, out, nil
}

func asExit(err error, target **ExitError) bool {
	e, ok := err.(*ExitError)
	if ok {
		*target = e
	}
	return ok
}

// labelList reads "needs" (or "dependencies"): a list of strings, or one
// string.
func labelList(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("expected a list of names, found %s", kindOf(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("expected a list of names, not %s", kindOf(v))
}

// creationOrder sorts the labels so that each comes after those it needs
// (Kahn's algorithm, lexical among the ready), or names a cycle.
func creationOrder(needs map[string][]string) ([]string, error) {
	waiting := map[string]int{}
	dependents := map[string][]string{}
	for label, list := range needs {
		waiting[label] = len(slices.Compact(slices.Sorted(slices.Values(list))))
		for _, n := range slices.Compact(slices.Sorted(slices.Values(list))) {
			dependents[n] = append(dependents[n], label)
		}
	}
	var ready, order []string
	for label, n := range waiting {
		if n == 0 {
			ready = append(ready, label)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		label := ready[0]
		ready = ready[1:]
		order = append(order, label)
		for _, d := range dependents[label] {
			if waiting[d]--; waiting[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	if len(order) < len(needs) {
		var stuck []string
		for label, n := range waiting {
			if n > 0 {
				stuck = append(stuck, label)
			}
		}
		slices.Sort(stuck)
		return nil, fmt.Errorf("the needs of %s form a cycle", strings.Join(stuck, ", "))
	}
	return order, nil
}

// pipelineOutput is what `task create -f PIPELINE --json` prints.
type pipelineOutput struct {
	TaskGroupID string                   `json:"taskGroupId"`
	Tasks       map[string]createdOutput `json:"tasks"`
}

// createPipeline creates a pipeline file's tasks as one task group.
func (a *app) createPipeline(ctx context.Context, name string, doc map[string]any, opts CreateOptions) error {
	if opts.TaskID != "" {
		return usagef("--task-id names one task; a pipeline's tasks take their taskId keys")
	}
	groupID, tasks, err := planPipeline(name, doc, Defaults{
		TaskQueueID: opts.TaskQueueID, Now: a.env.now(), RootURL: a.client.RootURL,
		Description: "Created with `hopper task create` from " + name + ".",
		Owner:       a.owner(),
	})
	if err != nil {
		return err
	}
	for _, t := range tasks {
		warnPayload(a.env.Stderr, t.doc, fmt.Sprintf("task %q: ", t.label))
	}
	result := pipelineOutput{TaskGroupID: groupID, Tasks: map[string]createdOutput{}}
	for i, t := range tasks {
		st, err := a.client.CreateTaskDocument(ctx, t.taskID, t.doc)
		if err != nil {
			created := make([]string, 0, i)
			for _, c := range tasks[:i] {
				created = append(created, c.label+" "+c.taskID)
			}
			doing := fmt.Sprintf("creating task %q (%s) of task group %s", t.label, t.taskID, groupID)
			if len(created) > 0 {
				doing += fmt.Sprintf(" (created before it: %s)", strings.Join(created, ", "))
			}
			return failure(doing, err)
		}
		result.Tasks[t.label] = createdOutput{TaskID: t.taskID, Status: *st}
	}
	if a.json {
		return a.printJSON(result)
	}
	fmt.Fprintf(a.env.Stdout, "Task group %s created: %s\n", groupID, count(len(tasks), "task"))
	width := 0
	for _, t := range tasks {
		width = max(width, len(t.label))
	}
	for _, t := range tasks {
		fmt.Fprintf(a.env.Stdout, "  %-*s  %s  %s\n", width, t.label, t.taskID, a.paint(result.Tasks[t.label].Status.State))
	}
	_, err = fmt.Fprintf(a.env.Stdout, "%s/ui/#/group/%s\n", a.client.RootURL, tcclient.EscapePathParam(groupID))
	return err
}

// withDefaults returns a copy of def with what it lacks taken from
// defaults: mappings are merged key by key (a task's metadata.name beside
// the file's metadata.owner), anything else the task sets wins whole.
// Nothing is shared with defaults, so filling in one task's defaults
// leaves the others' alone.
func withDefaults(def, defaults map[string]any) map[string]any {
	out := deepCopy(defaults).(map[string]any)
	for k, v := range def {
		if dm, ok := out[k].(map[string]any); ok {
			if tm, ok := v.(map[string]any); ok {
				out[k] = withDefaults(tm, dm)
				continue
			}
		}
		out[k] = deepCopy(v)
	}
	return out
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
