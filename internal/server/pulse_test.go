package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestNewServicesPulseOnRabbitMQ: on a real RabbitMQ, the github
// service's exchanges announce each accepted webhook delivery once (a
// redelivery of the same delivery id is not announced again), with
// Taskcluster's routing keys (primary.<owner>.<repo>[.<action>]); the
// notify service's Pulse channel publishes a pulse request and a task's
// notify.pulse route on exchange/taskcluster-notify/v1/notification with
// routing key primary.<key> and CC route.<key>, body {message, version}.
func TestNewServicesPulseOnRabbitMQ(t *testing.T) {
	t.Parallel()
	url := os.Getenv("HOPPER_TEST_AMQP")
	if url == "" {
		t.Skip("HOPPER_TEST_AMQP is not set: no RabbitMQ to publish to")
	}
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	run := strings.ToLower(tcclient.NewTaskID()[:10])
	run = strings.NewReplacer("_", "x", "-", "y").Replace(run)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	bind := func(exchange, key string) {
		require.NoError(t, ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil))
		require.NoError(t, ch.QueueBind(q.Name, key, exchange, false, nil))
	}
	gh, nf := "exchange/taskcluster-github/v1/", "exchange/taskcluster-notify/v1/notification"
	bind(gh+"push", "primary."+run+".#")
	bind(gh+"pull-request", "primary."+run+".#")
	bind(nf, "route.pulse-"+run+".#")
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)

	forges, _ := fuzzForgeConfig(t)
	r := start(t, server.Config{AMQP: url, ForgeConfig: forges})
	webhook := func(event, id string, body map[string]any) int {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		mac := hmac.New(sha256.New, []byte(fuzzWebhookKey))
		mac.Write(raw)
		req, err := http.NewRequest(http.MethodPost, r.rootURL+"/api/github/v1/github", bytes.NewReader(raw))
		require.NoError(t, err)
		req.Header = http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {event}, "X-Github-Delivery": {id},
			"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac.Sum(nil))}}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	repo := map[string]any{"name": "r", "full_name": run + "/r", "owner": map[string]any{"name": run, "login": run},
		"clone_url": "https://github.com/" + run + "/r.git", "html_url": "https://github.com/" + run + "/r"}
	push := map[string]any{"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000001", "after": fuzzCommit,
		"repository": repo, "sender": map[string]any{"login": run}, "installation": map[string]any{"id": 1},
		"head_commit": map[string]any{"message": "m"}, "commits": []any{map[string]any{"message": "m"}}}
	pull := map[string]any{"action": "opened", "number": 7, "repository": repo, "sender": map[string]any{"login": run},
		"installation": map[string]any{"id": 1}, "pull_request": map[string]any{"number": 7, "title": "t", "user": map[string]any{"login": run},
			"head": map[string]any{"sha": fuzzCommit, "ref": "feature", "repo": repo, "user": map[string]any{"login": run}},
			"base": map[string]any{"sha": fuzzCommit, "ref": "main", "repo": repo, "user": map[string]any{"login": run}}}}
	pushID := "push-" + run
	require.Equal(t, http.StatusNoContent, webhook("push", pushID, push))
	require.Equal(t, http.StatusOK, webhook("push", pushID, push), "a redelivery is recognised")
	require.Equal(t, http.StatusNoContent, webhook("pull_request", "pr-"+run, pull))

	status, reply := rootCall(t, r.rootURL, http.MethodPost, "/api/notify/v1/pulse", `{"routingKey":"pulse-`+run+`.api","message":{"from":"api"}}`)
	require.Equal(t, http.StatusOK, status, reply)
	def := newTask("pulse/q")
	def.Routes = []string{"notify.pulse.pulse-" + run + ".task.on-defined"}
	taskID := tcclient.NewTaskID()
	_, err = r.client.CreateTask(context.Background(), taskID, def)
	require.NoError(t, err)

	type got struct {
		exchange, key string
		cc            []string
		body          map[string]any
	}
	var msgs []got
	timeout := time.After(60 * time.Second)
	for len(msgs) < 4 {
		select {
		case d := <-deliveries:
			var body map[string]any
			require.NoError(t, json.Unmarshal(d.Body, &body))
			var cc []string
			if v, ok := d.Headers["CC"].([]any); ok {
				for _, c := range v {
					cc = append(cc, fmt.Sprint(c))
				}
			}
			msgs = append(msgs, got{d.Exchange, d.RoutingKey, cc, body})
		case <-timeout:
			t.Fatalf("60 s and %d of 4 messages: %+v", len(msgs), msgs)
		}
	}
	// Nothing more: the redelivery was not announced again.
	select {
	case d := <-deliveries:
		t.Fatalf("a fifth message: %s %s %s", d.Exchange, d.RoutingKey, d.Body)
	case <-time.After(2 * time.Second):
	}
	byKey := map[string]got{}
	for _, m := range msgs {
		byKey[m.exchange+" "+m.key] = m
	}
	p, ok := byKey[gh+"push primary."+run+".r"]
	require.True(t, ok, "%+v", msgs)
	require.Equal(t, pushID, p.body["eventId"])
	require.Equal(t, "github-push", p.body["tasks_for"])
	require.Equal(t, "main", p.body["branch"])
	pr, ok := byKey[gh+"pull-request primary."+run+".r.opened"]
	require.True(t, ok, "%+v", msgs)
	require.Equal(t, "opened", pr.body["action"])
	api, ok := byKey[nf+" primary.pulse-"+run+".api"]
	require.True(t, ok, "%+v", msgs)
	require.Equal(t, map[string]any{"from": "api"}, api.body["message"])
	require.EqualValues(t, 1, api.body["version"])
	require.Equal(t, []string{"route.pulse-" + run + ".api"}, api.cc)
	task, ok := byKey[nf+" primary.pulse-"+run+".task"]
	require.True(t, ok, "%+v", msgs)
	require.Equal(t, []string{"route.pulse-" + run + ".task"}, task.cc)
	require.Contains(t, fmt.Sprint(task.body["message"]), taskID)
}
