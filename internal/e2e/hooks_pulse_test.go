package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestHookPulseBindings: with a broker, a hook bound to the queue's own
// task-defined exchange fires (firedBy pulseMessage, the message as its
// payload) for the tasks its routing-key pattern selects, and only those.
func TestHookPulseBindings(t *testing.T) {
	t.Parallel()
	amqpURL := os.Getenv("HOPPER_TEST_AMQP")
	if amqpURL == "" {
		t.Skip("HOPPER_TEST_AMQP not set: no RabbitMQ for hook bindings")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--amqp", amqpURL}})
	c := rootClient(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	run := time.Now().UnixNano() % 1e6
	prov := fmt.Sprintf("e2e-pulse-%d", run)
	group, id := fmt.Sprintf("e2e-pulse-%d", run), "on-defined"
	source, other, target := prov+"/source", prov+"/other", prov+"/fired"
	_, err := c.CreateRole(ctx, "hook-id:"+group+"/*", &tcclient.RoleRequest{Description: "pulse e2e",
		Scopes: []string{"queue:create-task:lowest:" + target, "queue:create-task:project:none", "queue:scheduler-id:-"}})
	require.NoError(t, err)
	// A first task makes the queue declare its exchange.
	_, err = c.CreateTask(ctx, tcclient.NewTaskID(), newTask(other))
	require.NoError(t, err)

	_, err = c.CreateHook(ctx, group, id, &tcclient.Hook{
		Metadata: json.RawMessage(`{"name":"on defined","description":"e2e","owner":"e2e@example.com"}`),
		Bindings: json.RawMessage(`[{"exchange":"exchange/taskcluster-queue/v1/task-defined","routingKeyPattern":"primary.*.*.*.*.` + prov + `.source.#"}]`),
		Task: json.RawMessage(`{"taskQueueId":"` + target + `","payload":{},"deadline":{"$fromNow":"1 hour"},
			"extra":{"source":{"$eval":"payload.status.taskId"}},
			"metadata":{"name":"${firedBy}","description":"d","owner":"e2e@example.com","source":"https://example.com"}}`),
		TriggerSchema: json.RawMessage(`{"type":"object","required":["status"]}`),
	})
	require.NoError(t, err)

	// The binding is made in the background: create source tasks until
	// one fires the hook.
	var fired tcclient.HookFire
	var sourceIDs []string
	createSource := func() string {
		sourceID := tcclient.NewTaskID()
		_, err := c.CreateTask(ctx, sourceID, newTask(source))
		require.NoError(t, err)
		sourceIDs = append(sourceIDs, sourceID)
		_, err = c.CreateTask(ctx, tcclient.NewTaskID(), newTask(other)) // not selected
		require.NoError(t, err)
		return sourceID
	}
	lastCreated := time.Time{}
	testclock.WaitFor(t, time.Minute, "a source task to fire the hook", func() bool {
		fires, err := c.AllLastFires(ctx, group, id)
		require.NoError(t, err)
		if len(fires) > 0 {
			fired = fires[len(fires)-1]
			return true
		}
		// One more source task per quarter second while the binding is
		// not there (its messages are lost).
		if time.Since(lastCreated) >= 250*time.Millisecond {
			createSource()
			lastCreated = time.Now()
		}
		return false
	})
	require.Equal(t, "pulseMessage", fired.FiredBy)
	require.Equal(t, "success", fired.Result, fired.Error)
	task, err := c.Task(ctx, fired.TaskID)
	require.NoError(t, err)
	require.Equal(t, "pulseMessage", task.Metadata.Name)
	var extra struct {
		Source string `json:"source"`
	}
	require.NoError(t, json.Unmarshal(task.Extra, &extra))
	require.Contains(t, sourceIDs, extra.Source, "the payload is the message about a source task")

	// Every selected message fires once; others never do. A last source
	// task, made with the binding in place, fires after the messages
	// published before it were handled.
	last := createSource()
	var fires []tcclient.HookFire
	testclock.WaitFor(t, time.Minute, "the last source task to fire the hook", func() bool {
		fires, err = c.AllLastFires(ctx, group, id)
		require.NoError(t, err)
		for _, f := range fires {
			tk, err := c.Task(ctx, f.TaskID)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(tk.Extra, &extra))
			if extra.Source == last {
				return true
			}
		}
		return false
	})
	seen := map[string]bool{}
	for _, f := range fires {
		tk, err := c.Task(ctx, f.TaskID)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(tk.Extra, &extra))
		require.Contains(t, sourceIDs, extra.Source)
		require.False(t, seen[extra.Source], "message about %s fired twice", extra.Source)
		seen[extra.Source] = true
	}

	// Hook changes are published as Taskcluster's hooks service publishes
	// them (the exchange exists since the first hook was created).
	ch := amqpChannel(t, amqpURL)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q.Name, "#", "exchange/taskcluster-hooks/v1/hook-created", false, nil))
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)
	_, err = c.CreateHook(ctx, group, "second", &tcclient.Hook{
		Metadata: json.RawMessage(`{"name":"second","description":"e2e","owner":"e2e@example.com"}`),
		Task:     json.RawMessage(`{}`),
	})
	require.NoError(t, err)
	for {
		select {
		case d := <-deliveries:
			if !strings.Contains(string(d.Body), group) {
				continue // another test's hook
			}
			require.Equal(t, "_", d.RoutingKey)
			require.JSONEq(t, `{"hookGroupId":"`+group+`","hookId":"second"}`, string(d.Body))
		case <-time.After(20 * time.Second):
			t.Fatal("no hook-created message")
		}
		break
	}

	// Removing the hook stops it (and deletes its queue).
	require.NoError(t, c.RemoveHook(ctx, group, id))
	require.NoError(t, c.RemoveHook(ctx, group, "second"))
}
