package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestServePublishesPulseEvents runs `hopper serve --amqp` and checks, as a
// Pulse consumer would, the messages of one task's life: exchanges, routing
// keys, bodies and the CC route.
func TestServePublishesPulseEvents(t *testing.T) {
	t.Parallel()
	url := os.Getenv("HOPPER_TEST_AMQP")
	if url == "" {
		t.Skip("HOPPER_TEST_AMQP not set: no RabbitMQ for hopper serve to publish to")
	}
	ch := amqpChannel(t, url)

	taskID := tcclient.NewTaskID()
	route := "index.e2e." + strings.ToLower(strings.ReplaceAll(taskID, "_", "-"))
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	const prefix = "exchange/taskcluster-queue/v1/"
	for _, ex := range []string{"task-defined", "task-pending", "task-running", "task-completed"} {
		// Declared as hopper declares them, so binding works before its
		// first publish.
		require.NoError(t, ch.ExchangeDeclare(prefix+ex, "topic", true, false, false, false, nil))
		require.NoError(t, ch.QueueBind(q.Name, "primary."+taskID+".#", prefix+ex, false, nil))
	}
	require.NoError(t, ch.QueueBind(q.Name, "route."+route, prefix+"task-completed", false, nil))
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)

	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--amqp", url}})
	c := rootClient(srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	def := newTask("events/e2e")
	def.Routes = []string{route}
	def.Tags = map[string]string{"kind": "e2e"}
	_, err = c.CreateTask(ctx, taskID, def)
	require.NoError(t, err)
	res, err := c.ClaimWork(ctx, "events/e2e", &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "wid", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
	creds := res.Tasks[0].Credentials
	_, err = c.WithCredentials(&creds).ReportCompleted(ctx, taskID, 0)
	require.NoError(t, err)

	type got struct {
		exchange, key string
		body          map[string]any
	}
	var msgs []got
	timeout := time.After(20 * time.Second)
	for len(msgs) < 4 {
		select {
		case d := <-deliveries:
			var body map[string]any
			require.NoError(t, json.Unmarshal(d.Body, &body))
			require.Equal(t, "application/json", d.ContentType)
			msgs = append(msgs, got{strings.TrimPrefix(d.Exchange, prefix), d.RoutingKey, body})
		case <-timeout:
			t.Fatalf("got %d of 4 messages: %+v", len(msgs), msgs)
		}
	}
	want := []struct{ exchange, key string }{
		{"task-defined", "primary." + taskID + "._._._.events.e2e.-." + taskID + "._"},
		{"task-pending", "primary." + taskID + ".0._._.events.e2e.-." + taskID + "._"},
		{"task-running", "primary." + taskID + ".0.wg.wid.events.e2e.-." + taskID + "._"},
		{"task-completed", "primary." + taskID + ".0.wg.wid.events.e2e.-." + taskID + "._"},
	}
	for i, w := range want {
		require.Equal(t, w.exchange, msgs[i].exchange, "message %d", i)
		require.Equal(t, w.key, msgs[i].key, "message %d", i)
		require.EqualValues(t, 1, msgs[i].body["version"])
		status := msgs[i].body["status"].(map[string]any)
		require.Equal(t, taskID, status["taskId"])
	}
	require.Equal(t, "unscheduled", msgs[0].body["status"].(map[string]any)["state"])
	require.Equal(t, map[string]any{"kind": "e2e"}, msgs[3].body["task"].(map[string]any)["tags"])
	require.Equal(t, "completed", msgs[3].body["status"].(map[string]any)["state"])
	require.NotEmpty(t, msgs[2].body["takenUntil"])

	// A consumer bound only to the task's route gets the completion too.
	q2, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q2.Name, "route."+route, prefix+"task-completed", false, nil))
	_, err = c.RerunTask(ctx, taskID)
	require.NoError(t, err)
	res, err = c.ClaimWork(ctx, "events/e2e", &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "wid", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
	creds = res.Tasks[0].Credentials
	_, err = c.WithCredentials(&creds).ReportCompleted(ctx, taskID, 1)
	require.NoError(t, err)
	routed, err := ch.Consume(q2.Name, "", true, true, false, false, nil)
	require.NoError(t, err)
	select {
	case d := <-routed:
		require.Equal(t, prefix+"task-completed", d.Exchange)
		require.Contains(t, d.Headers["CC"], "route."+route)
	case <-time.After(20 * time.Second):
		t.Fatal("no task-completed message through the task's route")
	}
}

// amqpChannel is a channel on the RabbitMQ at url, closed with the test.
func amqpChannel(t *testing.T, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	return ch
}
