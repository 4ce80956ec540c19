package notifysend_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifysend"
	"github.com/hopper-ci/hopper/internal/notifysend/chattest"
)

func isPermanent(err error) bool {
	var perm *notify.PermanentError
	return err != nil && errorsAs(err, &perm)
}

// TestSlack posts through chat.postMessage and an incoming webhook to a
// stand-in that checks each request against Slack's OpenAPI description,
// and classifies Slack's answers: an unknown channel or a bad token fails
// for good, a rate limit is retried.
func TestSlack(t *testing.T) {
	t.Parallel()
	slack := chattest.NewSlack(t, "xoxb-test-token", "C0GOOD")
	cfg := &notifysend.Config{Slack: &notifysend.SlackConfig{APIURL: slack.URL, Token: "xoxb-test-token",
		Webhooks: map[string]string{"C0HOOK": slack.WebhookURL("C0HOOK")}}}
	d, err := notifysend.New(cfg, notifysend.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	msg := &notify.Slack{ChannelID: "C0GOOD", Text: "nightly failed",
		Blocks:      json.RawMessage(`[{"type":"section","text":{"type":"mrkdwn","text":"*nightly* failed"}}]`),
		Attachments: json.RawMessage(`[{"text":"log"}]`), UnfurlLinks: true}
	require.NoError(t, d.Send(ctx, "id1", "task-failed", &notify.Message{Slack: msg}))
	got := slack.Messages()
	require.Len(t, got, 1)
	require.Equal(t, "C0GOOD", got[0].Channel)
	require.Equal(t, "nightly failed", got[0].Params["text"])
	require.Equal(t, true, got[0].Params["unfurl_links"])
	require.Equal(t, false, got[0].Params["unfurl_media"])
	require.Len(t, got[0].Params["blocks"], 1)

	err = d.Send(ctx, "id2", "", &notify.Message{Slack: &notify.Slack{ChannelID: "C0MISSING", Text: "x"}})
	require.True(t, isPermanent(err), "channel_not_found: %v", err)
	require.ErrorContains(t, err, "channel_not_found")

	slack.RateLimited = true
	err = d.Send(ctx, "id3", "", &notify.Message{Slack: &notify.Slack{ChannelID: "C0GOOD", Text: "x"}})
	require.Error(t, err)
	require.False(t, isPermanent(err), "a rate limit is retried: %v", err)
	slack.RateLimited = false

	bad, err := notifysend.New(&notifysend.Config{Slack: &notifysend.SlackConfig{APIURL: slack.URL, Token: "xoxb-wrong"}}, notifysend.Options{})
	require.NoError(t, err)
	err = bad.Send(ctx, "id4", "", &notify.Message{Slack: &notify.Slack{ChannelID: "C0GOOD", Text: "x"}})
	require.True(t, isPermanent(err))
	require.ErrorContains(t, err, "invalid_auth")

	require.NoError(t, d.Send(ctx, "id5", "", &notify.Message{Slack: &notify.Slack{ChannelID: "C0HOOK", Text: "via webhook"}}))
	got = slack.Messages()
	require.True(t, got[len(got)-1].Webhook)
	require.Equal(t, "via webhook", got[len(got)-1].Params["text"])
	require.Empty(t, slack.Refusals())
}

// TestMatrix puts m.room.message events to a stand-in that checks each
// request against the Matrix specification: the notification's id is the
// transaction id, so a send repeated after a lost record posts once; a
// room the account has not joined fails for good, a rate limit is retried.
func TestMatrix(t *testing.T) {
	t.Parallel()
	hs := chattest.NewMatrix(t, "syt_token", "!joined:localhost")
	d, err := notifysend.New(&notifysend.Config{Matrix: &notifysend.MatrixConfig{BaseURL: hs.URL, AccessToken: "syt_token"}}, notifysend.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	m := &notify.Matrix{RoomID: "!joined:localhost", Body: "nightly failed", Format: "org.matrix.custom.html",
		FormattedBody: "<b>nightly</b> failed", Msgtype: "m.notice"}
	require.NoError(t, d.Send(ctx, "0190-aaaa", "task-failed", &notify.Message{Matrix: m}))
	require.NoError(t, d.Send(ctx, "0190-aaaa", "task-failed", &notify.Message{Matrix: m}), "the same notification again")
	require.Equal(t, 2, hs.Puts())
	events := hs.Events()
	require.Len(t, events, 1, "one event per transaction id")
	require.Equal(t, "0190-aaaa", events[0].TxnID)
	require.Equal(t, map[string]any{"msgtype": "m.notice", "body": "nightly failed", "format": "org.matrix.custom.html",
		"formatted_body": "<b>nightly</b> failed"}, events[0].Content)

	require.NoError(t, d.Send(ctx, "0190-bbbb", "", &notify.Message{Matrix: &notify.Matrix{RoomID: "!joined:localhost", Body: "plain", Msgtype: "m.text"}}))
	require.Len(t, hs.Events(), 2)

	err = d.Send(ctx, "0190-cccc", "", &notify.Message{Matrix: &notify.Matrix{RoomID: "!elsewhere:localhost", Body: "x"}})
	require.True(t, isPermanent(err), "M_FORBIDDEN: %v", err)
	require.ErrorContains(t, err, "M_FORBIDDEN")

	hs.RateLimited = true
	err = d.Send(ctx, "0190-dddd", "", &notify.Message{Matrix: &notify.Matrix{RoomID: "!joined:localhost", Body: "x"}})
	require.Error(t, err)
	require.False(t, isPermanent(err), "M_LIMIT_EXCEEDED is retried: %v", err)
	require.Empty(t, hs.Refusals())
}

// TestWebhookDelivery: a delivery is signed over the raw body with the
// configured secret and carries its id and event; 5xx is retried, other
// 4xx and redirects fail for good, an unconfigured name fails for good.
func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	secret := "webhook-secret-0123456789"
	var (
		mu      sync.Mutex
		status  = http.StatusNoContent
		headers []http.Header
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.VerifyWebhook([]byte(secret), r.Header.Get(notify.SignatureHeader), body, time.Now(), time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		headers = append(headers, r.Header.Clone())
		if status == http.StatusFound {
			w.Header().Set("Location", "https://elsewhere.example/")
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	d, err := notifysend.New(&notifysend.Config{Webhooks: map[string]notifysend.WebhookConfig{"ci": {URL: srv.URL, Secret: secret}}}, notifysend.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	send := func() error {
		return d.Send(ctx, "delivery-1", "task-failed", &notify.Message{Webhook: &notify.Webhook{Name: "ci", Body: json.RawMessage(`{"a":1}`)}})
	}
	require.NoError(t, send())
	require.Equal(t, "delivery-1", headers[0].Get(notify.DeliveryHeader))
	require.Equal(t, "task-failed", headers[0].Get(notify.EventHeader))
	for code, permanent := range map[int]bool{http.StatusServiceUnavailable: false, http.StatusTooManyRequests: false,
		http.StatusGone: true, http.StatusUnauthorized: true, http.StatusFound: true} {
		mu.Lock()
		status = code
		mu.Unlock()
		err := send()
		require.Error(t, err, "status %d", code)
		require.Equal(t, permanent, isPermanent(err), "status %d: %v", code, err)
	}
	err = d.Send(ctx, "x", "", &notify.Message{Webhook: &notify.Webhook{Name: "other", Body: json.RawMessage(`{}`)}})
	require.True(t, isPermanent(err))
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
