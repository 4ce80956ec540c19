package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifysend/chattest"
	"github.com/hopper-ci/hopper/internal/notifysend/mailpittest"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// rawWebhook keeps each delivery as it arrived: the raw body and the
// signature header, for the guide's verifier to check.
type rawWebhook struct {
	mu         sync.Mutex
	deliveries []rawDelivery
}

type rawDelivery struct {
	signature string
	body      []byte
}

func (w *rawWebhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.deliveries = append(w.deliveries, rawDelivery{r.Header.Get(notify.SignatureHeader), body})
	w.mu.Unlock()
	rw.WriteHeader(http.StatusNoContent)
}

func (w *rawWebhook) all() []rawDelivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]rawDelivery(nil), w.deliveries...)
}

// TestNotifyGuideNightlyBuild follows docs/notify.md as written: the
// channels file (its example hosts turned into a real SMTP server, Mailpit,
// and local endpoints), the nightly hook and its role created by the
// guide's commands, the hook triggered; the build fails (there is no
// Makefile), the team gets "Nightly build failed" and the chat webhook a
// signed task-failed delivery, which the guide's Python verifier accepts
// and whose fields are those the guide shows. A task with the guide's
// extra.notify gets its subject; a hook whose role lacks a scope mails
// its owner when the schedule fires it (emailOnError).
func TestNotifyGuideNightlyBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	mp := mailpittest.Start(t, mailpittest.Options{TLS: "starttls", Username: "hopper", Password: "guide-smtp-pass"})
	chat := &rawWebhook{}
	chatSrv := httptest.NewServer(chat)
	t.Cleanup(chatSrv.Close)
	slack := chattest.NewSlack(t, "xoxb-guide", "C0123ABCD")
	matrix := chattest.NewMatrix(t, "syt_guide", "!guide:example.org")
	const secret = "guide-webhook-secret-0123456789"

	dir := t.TempDir()
	config := e2e.DocExample(t, "notify-config").Replace(t,
		"smtp.example.com", "127.0.0.1",
		"port: 587", "port: "+strconv.Itoa(mp.SMTPPort),
		"# caFile: /etc/hopper/relay-ca.pem", "caFile: "+mp.CAFile,
		`token: ""`, `apiUrl: `+slack.URL,
		"https://hooks.slack.com/services/T000/B000/XXXX", slack.URL+"/incoming",
		"https://matrix.example.org", matrix.URL,
		"https://chat.example.com/hooks/hopper", chatSrv.URL+"/hooks/hopper")
	configFile := filepath.Join(dir, "notify.yml")
	require.NoError(t, os.WriteFile(configFile, []byte(config), 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--notify-config", configFile}, Env: []string{
		"HOPPER_NOTIFY_SMTP_PASSWORD=guide-smtp-pass", "HOPPER_NOTIFY_WEBHOOK_CHAT_SECRET=" + secret,
		"HOPPER_NOTIFY_SLACK_TOKEN=xoxb-guide", "HOPPER_NOTIFY_MATRIX_TOKEN=syt_guide"}})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "proj/linux"})
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// The nightly hook, its role and a fire, as the guide has them.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nightly.json"), []byte(e2e.DocExample(t, "notify-nightly-hook").Text), 0o600))
	out, err := e2e.DocShell{Dir: dir, Env: srv.Env()}.Run(t, e2e.DocExample(t, "notify-nightly-setup"))
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	taskID := regexp.MustCompile(`[A-Za-z0-9_-]{22}`).FindString(lines[len(lines)-1])
	require.NotEmpty(t, taskID, "hook trigger prints the taskId: %s", out)
	testclock.WaitFor(t, 2*time.Minute, "the nightly build resolves", func() bool {
		st, err := q.Status(ctx, taskID)
		return err == nil && st.State == tcclient.StateFailed
	})

	var mail mailpittest.Summary
	testclock.WaitFor(t, 2*time.Minute, "the team's mail", func() bool {
		for _, m := range mp.Messages(t) {
			if m.Subject == "Nightly build failed" {
				mail = m
				return true
			}
		}
		return false
	})
	require.Equal(t, "team@example.com", mail.To[0].Address)

	// The chat webhook's delivery: signed as the guide says (its Python
	// verifier accepts it and refuses a changed body), with the fields the
	// guide shows.
	var failed rawDelivery
	testclock.WaitFor(t, time.Minute, "the task-failed delivery", func() bool {
		for _, d := range chat.all() {
			if strings.Contains(string(d.body), `"event":"task-failed"`) {
				failed = d
				return true
			}
		}
		return false
	})
	if _, err := exec.LookPath("python3"); err == nil {
		verifier := filepath.Join(dir, "verify.py")
		require.NoError(t, os.WriteFile(verifier, []byte(e2e.DocExample(t, "notify-verify-python").Text+`
import sys
print(verify(sys.argv[1].encode(), sys.argv[2], open(sys.argv[3], "rb").read()))
`), 0o600))
		for body, want := range map[string]string{string(failed.body): "True", strings.Replace(string(failed.body), "failed", "passed", 1): "False"} {
			bodyFile := filepath.Join(dir, "body.json")
			require.NoError(t, os.WriteFile(bodyFile, []byte(body), 0o600))
			got, err := exec.Command("python3", verifier, secret, failed.signature, bodyFile).CombinedOutput()
			require.NoError(t, err, string(got))
			require.Equal(t, want, strings.TrimSpace(string(got)))
		}
	} else {
		t.Log("python3 not installed: the guide's Python verifier is not run")
	}
	var delivery map[string]any
	require.NoError(t, json.Unmarshal(failed.body, &delivery))
	keys := map[string]bool{}
	collectKeys(delivery, keys)
	for _, m := range regexp.MustCompile(`"([a-zA-Z]+)":`).FindAllStringSubmatch(e2e.DocExample(t, "notify-webhook-body").Text, -1) {
		require.True(t, keys[m[1]], "the guide shows a field %q that deliveries do not have", m[1])
	}

	// A task with the guide's extra.notify.
	var extra map[string]any
	require.NoError(t, json.Unmarshal([]byte("{"+e2e.DocExample(t, "notify-extra").Text+"}"), &extra))
	fragTask := tcclient.NewTaskID()
	_, err = q.CreateTaskDocument(ctx, fragTask, map[string]any{
		"taskQueueId": "proj/linux", "created": time.Now().UTC().Format(time.RFC3339), "deadline": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"routes":   []string{"notify.email.frag@example.com.on-failed"},
		"payload":  map[string]any{"command": [][]string{{"sh", "-c", "exit 1"}}, "maxRunTime": 60},
		"metadata": map[string]any{"name": "extra", "description": "d", "owner": "me@example.com", "source": "https://example.com"},
		"extra":    extra["extra"],
	})
	require.NoError(t, err)
	testclock.WaitFor(t, 2*time.Minute, "the extra.notify subject", func() bool {
		for _, m := range mp.Messages(t) {
			if m.Subject == "Nightly extra: failed" {
				return true
			}
		}
		return false
	})

	// A scheduled fire the role does not allow mails the owner.
	_, err = q.CreateHook(ctx, "proj", "every-second", &tcclient.Hook{
		Metadata: json.RawMessage(`{"name": "n", "description": "d", "owner": "owner@example.com"}`),
		Schedule: []string{"* * * * * *"},
		Task:     json.RawMessage(`{"taskQueueId": "other/queue", "payload": {}, "metadata": {"name": "n", "description": "d", "owner": "me@example.com", "source": "https://example.com"}}`),
	})
	require.NoError(t, err)
	testclock.WaitFor(t, 2*time.Minute, "the owner's mail about the failed fire", func() bool {
		for _, m := range mp.Messages(t) {
			if m.Subject == "Scheduled hook proj/every-second created no task" {
				return true
			}
		}
		return false
	})
	require.NoError(t, q.RemoveHook(ctx, "proj", "every-second"))
}

// collectKeys adds every object key anywhere in v to keys.
func collectKeys(v any, keys map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			keys[k] = true
			collectKeys(e, keys)
		}
	case []any:
		for _, e := range x {
			collectKeys(e, keys)
		}
	}
}
