package notifysend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/notify"
)

// maxAnswer bounds how much of a channel's answer is read.
const maxAnswer = 64 * 1024

// post sends body to u with the headers, and classifies the answer: 2xx
// is success; 408, 425, 429 and 5xx fail for now; any other status fails
// for good. It returns the answer's body.
func post(ctx context.Context, client *http.Client, method, u string, header http.Header, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, notify.SendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, notify.Permanent(fmt.Errorf("building the request: %w", err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, redact(u), err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode/100 == 2 {
		return answer, nil
	}
	err = fmt.Errorf("%s %s answered %s: %s", method, redact(u), resp.Status, strings.TrimSpace(string(answer[:min(len(answer), 300)])))
	switch {
	case resp.StatusCode == 408 || resp.StatusCode == 425 || resp.StatusCode == 429 || resp.StatusCode >= 500:
		return answer, err
	}
	return answer, notify.Permanent(err)
}

// redact drops a URL's path and query from errors: incoming-webhook URLs
// carry their secret there.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an invalid URL)"
	}
	return p.Scheme + "://" + p.Host + "/…"
}

// slackSender posts to Slack.
type slackSender struct {
	cfg    SlackConfig
	client *http.Client
}

// send posts one message: through the channel's incoming webhook if one is
// configured, else with chat.postMessage. Slack answers errors of the Web
// API with HTTP 200 and {"ok": false, "error": …}; "ratelimited" and server
// errors are retried, the rest (channel_not_found, not_in_channel,
// invalid_auth, …) fail for good.
func (s *slackSender) send(ctx context.Context, m *notify.Slack) error {
	msg := map[string]any{"text": m.Text}
	if len(m.Blocks) > 0 {
		msg["blocks"] = m.Blocks
	}
	if len(m.Attachments) > 0 {
		msg["attachments"] = m.Attachments
	}
	msg["unfurl_links"], msg["unfurl_media"] = m.UnfurlLinks, m.UnfurlMedia
	if hook, ok := s.cfg.Webhooks[m.ChannelID]; ok {
		body, err := json.Marshal(msg)
		if err != nil {
			return notify.Permanent(err)
		}
		_, err = post(ctx, s.client, http.MethodPost, hook, http.Header{"Content-Type": {"application/json"}}, body)
		return err
	}
	if s.cfg.Token == "" {
		return notify.Permanent(fmt.Errorf("no Slack token, and no incoming webhook for channel %s", m.ChannelID))
	}
	msg["channel"] = m.ChannelID
	body, err := json.Marshal(msg)
	if err != nil {
		return notify.Permanent(err)
	}
	base := s.cfg.APIURL
	if base == "" {
		base = "https://slack.com/api"
	}
	answer, err := post(ctx, s.client, http.MethodPost, strings.TrimRight(base, "/")+"/chat.postMessage", http.Header{
		"Content-Type": {"application/json; charset=utf-8"}, "Authorization": {"Bearer " + s.cfg.Token},
	}, body)
	if err != nil {
		return err
	}
	var res struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		return fmt.Errorf("reading Slack's answer: %w", err)
	}
	if res.OK {
		return nil
	}
	err = fmt.Errorf("slack chat.postMessage: %s", res.Error)
	switch res.Error {
	case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
		return err
	}
	return notify.Permanent(err)
}

// matrixSender posts to Matrix rooms.
type matrixSender struct {
	cfg    MatrixConfig
	client *http.Client
}

// send puts one m.room.message event with the notification's id as the
// transaction id: the homeserver keeps one event per (access token,
// txnId), so a message sent again after a sender died is not posted twice.
func (s *matrixSender) send(ctx context.Context, id string, m *notify.Matrix) error {
	content := map[string]any{"msgtype": m.Msgtype, "body": m.Body}
	if content["msgtype"] == "" {
		content["msgtype"] = "m.notice"
	}
	if m.FormattedBody != "" {
		content["format"] = m.Format
		content["formatted_body"] = m.FormattedBody
		if m.Format == "" {
			content["format"] = "org.matrix.custom.html"
		}
	}
	body, err := json.Marshal(content)
	if err != nil {
		return notify.Permanent(err)
	}
	u := strings.TrimRight(s.cfg.BaseURL, "/") + "/_matrix/client/v3/rooms/" + url.PathEscape(m.RoomID) +
		"/send/m.room.message/" + url.PathEscape(id)
	_, err = post(ctx, s.client, http.MethodPut, u, http.Header{
		"Content-Type": {"application/json"}, "Authorization": {"Bearer " + s.cfg.AccessToken},
	}, body)
	return err
}

// webhookSender posts signed deliveries.
type webhookSender struct {
	hooks  map[string]WebhookConfig
	client *http.Client
	now    func() time.Time
}

func (s *webhookSender) send(ctx context.Context, id, event string, w *notify.Webhook) error {
	hook, ok := s.hooks[w.Name]
	if !ok {
		return notify.Permanent(fmt.Errorf("no webhook named %q is configured", w.Name))
	}
	h := http.Header{
		"Content-Type":         {"application/json"},
		"User-Agent":           {"hopper-notify"},
		notify.SignatureHeader: {notify.SignWebhook([]byte(hook.Secret), s.now(), w.Body)},
		notify.DeliveryHeader:  {id},
	}
	if event != "" {
		h[notify.EventHeader] = []string{event}
	}
	_, err := post(ctx, s.client, http.MethodPost, hook.URL, h, w.Body)
	return err
}
