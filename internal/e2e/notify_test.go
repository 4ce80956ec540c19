package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifysend/chattest"
	"github.com/hopper-ci/hopper/internal/notifysend/mailpittest"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// webhookReceiver is an endpoint that verifies each delivery's signature
// as docs/notify.md tells receivers to, and keeps the bodies.
type webhookReceiver struct {
	secret []byte
	mu     sync.Mutex
	bodies []notify.WebhookBody
	ids    map[string]int
	errs   []string
}

func (w *webhookReceiver) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := notify.VerifyWebhook(w.secret, r.Header.Get(notify.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
		w.errs = append(w.errs, err.Error())
		http.Error(rw, err.Error(), http.StatusUnauthorized)
		return
	}
	var b notify.WebhookBody
	if err := json.Unmarshal(body, &b); err != nil {
		w.errs = append(w.errs, err.Error())
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Header.Get(notify.DeliveryHeader) != b.ID || r.Header.Get(notify.EventHeader) != b.Event {
		w.errs = append(w.errs, "headers disagree with the body")
	}
	w.ids[b.ID]++
	w.bodies = append(w.bodies, b)
	rw.WriteHeader(http.StatusNoContent)
}

// TestNotifyOfficialClient drives every Notify API method with the npm
// taskcluster-client (e2e/node/notify.mjs) against `hopper serve`
// configured with a real SMTP server (Mailpit, STARTTLS and a password), a
// signed webhook and, when HOPPER_TEST_AMQP is set, RabbitMQ for the
// notify exchange; then checks what each received: every email once, a
// task's failure mailed with its console link, its transitions posted to
// the webhook with valid signatures.
func TestNotifyOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	mp := mailpittest.Start(t, mailpittest.Options{TLS: "starttls", Username: "hopper", Password: "smtp-e2e-pass"})
	hook := &webhookReceiver{secret: []byte("e2e-webhook-secret-0123456789"), ids: map[string]int{}}
	hs := httptest.NewServer(hook)
	t.Cleanup(hs.Close)
	run := fmt.Sprintf("e2e%d", time.Now().UnixNano()%1000000)
	slack := chattest.NewSlack(t, "xoxb-e2e", "C0E2E")
	room := "!room" + run + ":example.org"
	matrix := chattest.NewMatrix(t, "syt_e2e", room)

	dir := t.TempDir()
	config := filepath.Join(dir, "notify.yml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`smtp:
  host: 127.0.0.1
  port: %d
  tls: starttls
  caFile: %s
  username: hopper
  from: "Hopper CI <hopper@ci.example>"
slack:
  apiUrl: %s
matrix:
  baseUrl: %s
webhooks:
  e2e:
    url: %s/hook
`, mp.SMTPPort, mp.CAFile, slack.URL, matrix.URL, hs.URL)), 0o600))
	args := []string{"--notify-config", config}
	var deliveries <-chan amqp.Delivery
	if url := os.Getenv("HOPPER_TEST_AMQP"); url != "" {
		args = append(args, "--amqp", url)
		ch := amqpChannel(t, url)
		exchange := "exchange/taskcluster-notify/v1/notification"
		require.NoError(t, ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil))
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind(q.Name, "primary.e2e."+run+".#", exchange, false, nil))
		require.NoError(t, ch.QueueBind(q.Name, "primary.e2e."+run, exchange, false, nil))
		deliveries, err = ch.Consume(q.Name, "", true, true, false, false, nil)
		require.NoError(t, err)
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: []string{
		"HOPPER_NOTIFY_SMTP_PASSWORD=smtp-e2e-pass", "HOPPER_NOTIFY_WEBHOOK_E2E_SECRET=" + string(hook.secret),
		"HOPPER_NOTIFY_SLACK_TOKEN=xoxb-e2e", "HOPPER_NOTIFY_MATRIX_TOKEN=syt_e2e"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "notify.mjs", append(srv.Env(), "E2E_RUN="+run)...)
	t.Log(out)
	require.Contains(t, out, "ok - the task's notifications are sent and listed with their delivery state", "the script ran to its end")
	taskID := ""
	for _, line := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(line, "TASK "); ok {
			taskID = strings.TrimSpace(id)
		}
	}
	require.NotEmpty(t, taskID)
	eventsTask := ""
	for _, line := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(line, "EVENTS "); ok {
			eventsTask = strings.TrimSpace(id)
		}
	}
	require.NotEmpty(t, eventsTask)

	// Email: each message once; the denied address got nothing while denied.
	var subjects []string
	testclock.WaitFor(t, 2*time.Minute, "ten emails", func() bool {
		subjects = subjects[:0]
		for _, m := range mp.Messages(t) {
			subjects = append(subjects, m.Subject)
		}
		return len(subjects) >= 10
	})
	eventsSubject := "[hopper] events " + run + ": "
	require.ElementsMatch(t, []string{"API mail " + run, "scoped " + run, "undenied " + run, "Nightly nightly " + run + " is failed",
		eventsSubject + "defined (" + eventsTask + ")", eventsSubject + "pending (" + eventsTask + ")",
		eventsSubject + "running on e2e-group/e2e-notify (" + eventsTask + ")",
		eventsSubject + "resolved as exception (malformed-payload) (" + eventsTask + ")",
		eventsSubject + "resolved as exception (malformed-payload) (" + eventsTask + ")",
		eventsSubject + "resolved as exception (malformed-payload) (" + eventsTask + ")"}, subjects, "on-defined, on-pending, on-running; on-exception, on-resolved and on-any; never on-completed or on-failed")
	for _, m := range mp.Messages(t) {
		if strings.HasPrefix(m.Subject, "Nightly") {
			full := mp.Message(t, m.ID)
			require.Equal(t, "nightly-"+run+"@example.com", full.To[0].Address)
			require.Equal(t, "hopper@ci.example", full.From.Address)
			require.Contains(t, full.Text, srv.RootURL+"/ui/#/task/"+taskID)
			require.Contains(t, full.HTML, `href="`+srv.RootURL+`/ui/#/task/`+taskID+`"`)
		}
	}

	// The webhook: every transition of the task, signed, each once.
	hook.mu.Lock()
	var events []string
	for _, b := range hook.bodies {
		if b.TaskID == taskID {
			events = append(events, b.Event)
			require.Equal(t, srv.RootURL+"/ui/#/task/"+taskID, b.URL)
			require.Equal(t, "notify.webhook.e2e.on-transition", b.Route)
		}
	}
	for id, n := range hook.ids {
		require.Equal(t, 1, n, "delivery %s", id)
	}
	require.Empty(t, hook.errs)
	hook.mu.Unlock()
	require.Equal(t, []string{"task-defined", "task-pending", "task-running", "task-failed"}, events)

	// Slack and Matrix (stand-ins checking Slack's OpenAPI description and
	// the Matrix specification): the API's messages and the task's.
	require.Eventually(t, func() bool { return len(slack.Messages()) >= 2 && len(matrix.Events()) >= 3 }, 20*time.Second, 100*time.Millisecond)
	var slackTexts []string
	for _, m := range slack.Messages() {
		slackTexts = append(slackTexts, m.Params["text"].(string))
	}
	require.Contains(t, slackTexts, "slack "+run)
	require.Contains(t, strings.Join(slackTexts, "\n"), srv.RootURL+"/ui/#/task/"+taskID)
	var bodies []string
	for _, e := range matrix.Events() {
		bodies = append(bodies, e.Content["body"].(string))
	}
	require.Contains(t, bodies, "matrix "+run)
	require.Contains(t, bodies, "scoped matrix "+run)
	require.Contains(t, bodies, "nightly "+run+" is failed: "+srv.RootURL+"/ui/#/task/"+taskID)
	require.Empty(t, slack.Refusals())
	require.Empty(t, matrix.Refusals())

	// `hopper notify test` checks each channel's configuration.
	cli := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, e2e.Binary(t), append([]string{"notify"}, args...)...)
		cmd.Env = append(os.Environ(), srv.Env()...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	got, err := cli("test", "email", "operator-"+run+"@example.com")
	require.NoError(t, err, got)
	require.Contains(t, got, "email to operator-"+run+"@example.com: sent")
	require.Eventually(t, func() bool {
		for _, m := range mp.Messages(t) {
			if m.To[0].Address == "operator-"+run+"@example.com" && m.Subject == "hopper notification test" {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond)
	got, err = cli("test", "webhook", "e2e")
	require.NoError(t, err, got)
	require.Contains(t, got, "webhook to e2e: sent")
	got, err = cli("test", "slack", "C0E2E")
	require.NoError(t, err, got)
	got, err = cli("test", "matrix", "!notjoined:example.org")
	require.Error(t, err, "the account is not in that room")
	require.Contains(t, got, "M_FORBIDDEN")
	got, err = cli("list", taskID)
	require.NoError(t, err, got)
	require.Contains(t, got, "nightly-"+run+"@example.com")
	require.Contains(t, got, "not a plain email address")

	// Pulse: the API's message and the task's on the notify exchange.
	if deliveries != nil {
		got := map[string]json.RawMessage{}
		timeout := time.After(30 * time.Second)
		for len(got) < 3 {
			select {
			case d := <-deliveries:
				got[d.RoutingKey] = d.Body
			case <-timeout:
				t.Fatalf("notify exchange messages: %v", got)
			}
		}
		require.JSONEq(t, `{"message": {"hello": "`+run+`"}, "version": 1}`, string(got["primary.e2e."+run]))
		require.JSONEq(t, `{"message": {}, "version": 1}`, string(got["primary.e2e."+run+".scoped"]))
		var task struct {
			Message struct {
				TaskID string `json:"taskId"`
				State  string `json:"state"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal(got["primary.e2e."+run+".task"], &task))
		require.Equal(t, taskID, task.Message.TaskID)
		require.Equal(t, "failed", task.Message.State)
	}
}
