package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// actionsJSON is a decision task's public/actions.json declaring
// create-interactive for the group's tasks tagged kind=test, as taskgraph
// declares it (here once as a task action, once as a hook action; the
// hook's payload is shaped as taskgraph's: decision and user, so that no
// top-level taskId names the task the hook creates).
const actionsJSON = `{"version": 1, "variables": {"project": "proj"}, "actions": [
 {"name": "create-interactive", "kind": "%KIND%", "title": "Create interactive task", "description": "d", "context": [{"kind": "test"}],
  "task": {"taskGroupId": {"$eval": "taskGroupId"}, "taskQueueId": "proj-ci/linux",
   "created": {"$fromNow": ""}, "deadline": {"$fromNow": "1 hour"},
   "payload": {"command": [["sh", "-c", "echo action"]], "maxRunTime": 60},
   "tags": {"action": "create-interactive", "for": {"$eval": "taskId"}, "own": {"$eval": "ownTaskId"}, "project": {"$eval": "project"}},
   "metadata": {"name": "action", "description": "the create-interactive action", "owner": "me@example.com", "source": "https://example.com"}},
  "hookGroupId": "proj-ci", "hookId": "create-interactive",
  "hookPayload": {"decision": {"project": {"$eval": "project"}}, "user": {"input": {"$eval": "input"}, "taskId": {"$eval": "taskId"}, "taskGroupId": {"$eval": "taskGroupId"}}}}
]}`

// TestInteractiveActionFromDecisionTask: `hopper task interactive` on a
// task whose decision task publishes public/actions.json with a
// create-interactive action triggers that action, as Treeherder's button
// does: the task kind creates the rendered action task (its tags show
// the context it was rendered with), the hook kind fires the hook with the
// rendered payload, after checking the decision task holds
// in-tree:hook-action:<hookGroupId>/<hookId>; --copy and a task outside
// the action's context get the plain interactive copy.
func TestInteractiveActionFromDecisionTask(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	const queue = "proj-ci/linux"
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: queue})
	c := rootClient(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	hookTask := `{"taskQueueId": "proj-ci/linux", "created": {"$fromNow": ""}, "deadline": {"$fromNow": "1 hour"},
		"payload": {"command": [["sh", "-c", "echo hook"]], "maxRunTime": 60},
		"tags": {"firedFor": "${payload.user.taskId}", "project": "${payload.decision.project}"},
		"metadata": {"name": "hook action", "description": "d", "owner": "me@example.com", "source": "https://example.com"}}`
	_, err := c.CreateHook(ctx, "proj-ci", "create-interactive", &tcclient.Hook{
		Metadata: json.RawMessage(`{"name": "create-interactive", "description": "d", "owner": "me@example.com"}`), Task: json.RawMessage(hookTask),
		TriggerSchema: json.RawMessage(`{"type": "object", "additionalProperties": false,
			"properties": {"decision": {"type": "object"}, "user": {"type": "object"}}, "required": ["decision", "user"]}`)})
	require.NoError(t, err)

	_, err = c.CreateRole(ctx, "hook-id:proj-ci/create-interactive", &tcclient.RoleRequest{Description: "the hook's tasks",
		Scopes: []string{"queue:create-task:*", "queue:scheduler-id:*"}})
	require.NoError(t, err)

	run := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.Command(e2e.Binary(t), args...)
		cmd.Env = append(os.Environ(), srv.Env()...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%v: %s", args, stderr.String())
		return strings.TrimSpace(string(out))
	}
	for _, kind := range []string{"task", "hook"} {
		t.Run(kind, func(t *testing.T) {
			decision := tcclient.NewTaskID()
			def := newTask(queue)
			def.TaskGroupID = decision
			def.Scopes = []string{"queue:*", "in-tree:hook-action:proj-ci/create-interactive"}
			script := "mkdir -p public && cat > public/actions.json <<'EOF'\n" + strings.ReplaceAll(actionsJSON, "%KIND%", kind) + "\nEOF"
			pl, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", script}}, "maxRunTime": 60,
				"artifacts": []map[string]string{{"type": "file", "path": "public/actions.json", "name": "public/actions.json"}}})
			require.NoError(t, err)
			def.Payload = pl
			_, err = c.CreateTask(ctx, decision, def)
			require.NoError(t, err)
			testclock.WaitFor(t, 2*time.Minute, "the decision task to complete", func() bool {
				st, err := c.Status(ctx, decision)
				return err == nil && st.State == tcclient.StateCompleted
			})
			failed := tcclient.NewTaskID()
			def = newTask(queue)
			def.TaskGroupID = decision
			def.Tags = map[string]string{"kind": "test"}
			_, err = c.CreateTask(ctx, failed, def)
			require.NoError(t, err)

			id := run(t, "task", "interactive", failed)
			made, err := c.Task(ctx, id)
			require.NoError(t, err)
			if kind == "task" {
				require.Equal(t, map[string]string{"action": "create-interactive", "for": failed, "own": id, "project": "proj"}, made.Tags)
			} else {
				require.Equal(t, map[string]string{"firedFor": failed, "project": "proj"}, made.Tags)
			}

			copied, err := c.Task(ctx, run(t, "task", "interactive", "--copy", failed))
			require.NoError(t, err)
			require.Equal(t, "Interactive: replica", copied.Metadata.Name, "--copy copies the task itself")

			other := tcclient.NewTaskID()
			def.Tags = map[string]string{"kind": "build"}
			_, err = c.CreateTask(ctx, other, def)
			require.NoError(t, err)
			copied, err = c.Task(ctx, run(t, "task", "interactive", other))
			require.NoError(t, err)
			require.Equal(t, "Interactive: replica", copied.Metadata.Name, "a task outside the action's context is copied")
		})
	}
}
