package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// wmPulseMessages are the WorkerManagerEvents exchanges as Taskcluster's
// exchange reference (services/worker-manager/src/exchanges.js) and its
// message schemas (schemas/v1/pulse-*.yml) declare them: the properties a
// message may have and those it must.
var wmPulseMessages = map[string]struct{ allowed, required []string }{
	"worker-pool-created": {[]string{"workerPoolId", "providerId", "previousProviderId"}, []string{"workerPoolId", "providerId"}},
	"worker-pool-updated": {[]string{"workerPoolId", "providerId", "previousProviderId"}, []string{"workerPoolId", "providerId"}},
	"worker-pool-error": {[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "launchConfigId", "errorId", "kind", "title", "timestamp"},
		[]string{"workerPoolId", "providerId", "errorId", "kind", "title", "timestamp"}},
	"worker-requested": {[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "launchConfigId", "timestamp"},
		[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "timestamp"}},
	"worker-running": {[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "launchConfigId", "timestamp"},
		[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "timestamp"}},
	"worker-stopped": {[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "launchConfigId", "timestamp"},
		[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "timestamp"}},
	"worker-removed": {[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "launchConfigId", "reason", "timestamp"},
		[]string{"workerPoolId", "providerId", "workerId", "workerGroup", "capacity", "reason", "timestamp"}},
}

// TestWorkerManagerPublishesPulseEvents runs `hopper serve --amqp` against
// RabbitMQ and checks, as a Pulse consumer bound to every
// WorkerManagerEvents exchange would, what a static pool's life and a
// docker pool that cannot start its worker publish: each message on its
// exchange, with Taskcluster's routing key
// (primary.<providerId>.<provisionerId>.<workerType>.<workerGroup>.<workerId>.<launchConfigId>._,
// "_" for what it does not name) and a body of exactly the properties its
// schema allows, the required ones present. The errors the background
// duties record were not published (Taskcluster's providers announce
// theirs on worker-pool-error).
func TestWorkerManagerPublishesPulseEvents(t *testing.T) {
	t.Parallel()
	url := os.Getenv("HOPPER_TEST_AMQP")
	if url == "" {
		t.Skip("HOPPER_TEST_AMQP not set: no RabbitMQ for hopper serve to publish to")
	}
	ch := amqpChannel(t, url)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	const prefix = "exchange/taskcluster-worker-manager/v1/"
	// Only this test's pools: pools are named after the test run.
	run := strings.ToLower(strings.ReplaceAll(tcclient.NewTaskID(), "_", "-"))[:10]
	for ex := range wmPulseMessages {
		require.NoError(t, ch.ExchangeDeclare(prefix+ex, "topic", true, false, false, false, nil))
		require.NoError(t, ch.QueueBind(q.Name, "primary.*.pulse-"+run+".#", prefix+ex, false, nil))
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)

	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--amqp", url}})
	c := rootClient(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	static, docker := "pulse-"+run+"/static", "pulse-"+run+"/docker"
	_, err = c.CreateWorkerPool(ctx, static, &tcclient.WorkerPoolDefinition{ProviderID: "static", Description: "pulse",
		Config: json.RawMessage(`{}`), Owner: "ops@example.com"})
	require.NoError(t, err)
	secret := tcclient.NewTaskID() + tcclient.NewTaskID()
	_, err = c.CreateStaticWorker(ctx, static, "rack", "m1", tcclient.NewTime(time.Now().Add(time.Hour)), 2, secret)
	require.NoError(t, err)
	_, err = (&tcclient.Client{RootURL: srv.RootURL}).RegisterStaticWorker(ctx, static, "static", "rack", "m1", secret)
	require.NoError(t, err)
	require.NoError(t, c.RemoveWorker(ctx, static, "rack", "m1"))
	_, err = c.UpdateWorkerPool(ctx, static, &tcclient.WorkerPoolDefinition{ProviderID: "static", Description: "pulse, updated",
		Config: json.RawMessage(`{}`), Owner: "ops@example.com"})
	require.NoError(t, err)
	// A docker pool whose daemon does not answer: the provisioner records
	// (and should announce) a provisioning-error.
	_, err = c.CreateWorkerPool(ctx, docker, &tcclient.WorkerPoolDefinition{ProviderID: "docker", Description: "pulse",
		Config: json.RawMessage(`{"minCapacity":1,"maxCapacity":1,"image":"none:1","hosts":[{"endpoint":"unix://` + t.TempDir() + `/none.sock"}]}`),
		Owner:  "ops@example.com"})
	require.NoError(t, err)

	type got struct {
		exchange, key string
		body          map[string]any
	}
	var msgs []got
	want := []string{"worker-pool-created", "worker-running", "worker-removed", "worker-stopped", "worker-pool-updated", "worker-pool-created", "worker-pool-error"}
	seen := func() []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.exchange)
		}
		return out
	}
	timeout := time.After(90 * time.Second)
	for {
		var missing bool
		have := seen()
		for _, ex := range want {
			if i := slices.Index(have, ex); i >= 0 {
				have = slices.Delete(have, i, i+1)
			} else {
				missing = true
			}
		}
		if !missing {
			break
		}
		select {
		case d := <-deliveries:
			var body map[string]any
			require.NoError(t, json.Unmarshal(d.Body, &body))
			require.Equal(t, "application/json", d.ContentType)
			msgs = append(msgs, got{strings.TrimPrefix(d.Exchange, prefix), d.RoutingKey, body})
		case <-timeout:
			t.Fatalf("got %v, want %v", seen(), want)
		}
	}
	for _, m := range msgs {
		t.Logf("%s %s %v", m.exchange, m.key, m.body)
		spec, ok := wmPulseMessages[m.exchange]
		require.True(t, ok, "exchange %s", m.exchange)
		for k := range m.body {
			require.Contains(t, spec.allowed, k, "%s: a property its schema does not allow", m.exchange)
		}
		for _, k := range spec.required {
			require.Contains(t, m.body, k, "%s: a required property", m.exchange)
		}
		words := strings.Split(m.key, ".")
		require.Len(t, words, 8, "routing key %s", m.key)
		require.Equal(t, "primary", words[0])
		require.Equal(t, "_", words[7], "the reserved word")
		pool, _ := m.body["workerPoolId"].(string)
		require.Equal(t, pool, words[2]+"/"+words[3], "provisionerId and workerType")
		require.Equal(t, m.body["providerId"], words[1])
		if group, ok := m.body["workerGroup"].(string); ok {
			require.Equal(t, []string{group, m.body["workerId"].(string)}, words[4:6])
		} else {
			require.Equal(t, []string{"_", "_"}, words[4:6])
		}
		require.Equal(t, "_", words[6], "no launch configurations")
	}
	removed := msgs[slices.IndexFunc(msgs, func(m got) bool { return m.exchange == "worker-removed" })]
	require.Equal(t, "workerManager.removeWorker API call", removed.body["reason"], "Taskcluster's reason")
	perr := msgs[slices.IndexFunc(msgs, func(m got) bool { return m.exchange == "worker-pool-error" })]
	require.Equal(t, "provisioning-error", perr.body["kind"])
}
