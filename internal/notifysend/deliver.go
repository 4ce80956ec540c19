package notifysend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/notify"
)

// PulseExchangePrefix starts the name of the notify service's exchange on
// the broker, as Taskcluster names it; NotificationExchange is its short
// name (the NotifyEvents reference's "notify" entry).
const (
	PulseExchangePrefix  = "exchange/taskcluster-notify/v1/"
	NotificationExchange = "notification"
)

// Deliverer sends messages to every configured channel.
type Deliverer struct {
	smtp    *smtpSender
	slack   *slackSender
	matrix  *matrixSender
	webhook *webhookSender
	pulse   events.Publisher
}

// Options are what a Deliverer needs besides its configuration.
type Options struct {
	// Pulse publishes on the notify exchange (nil: pulse is off).
	Pulse events.Publisher
	// HTTPClient is used for Slack, Matrix and webhooks (default: a
	// client without redirects: a delivery must not be sent on to
	// somewhere else).
	HTTPClient *http.Client
	// Now stamps webhook signatures (default time.Now).
	Now func() time.Time
}

// New builds a Deliverer over cfg.
func New(cfg *Config, opts Options) (*Deliverer, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	d := &Deliverer{pulse: opts.Pulse}
	if cfg.SMTP != nil {
		s, err := newSMTP(*cfg.SMTP)
		if err != nil {
			return nil, err
		}
		d.smtp = s
	}
	if cfg.Slack != nil {
		d.slack = &slackSender{cfg: *cfg.Slack, client: client}
	}
	if cfg.Matrix != nil {
		d.matrix = &matrixSender{cfg: *cfg.Matrix, client: client}
	}
	d.webhook = &webhookSender{hooks: cfg.Webhooks, client: client, now: opts.Now}
	return d, nil
}

// Configured reports whether the channel can send at all.
func (d *Deliverer) Configured(channel string) bool {
	switch channel {
	case notify.ChannelEmail:
		return d.smtp != nil
	case notify.ChannelSlack:
		return d.slack != nil
	case notify.ChannelMatrix:
		return d.matrix != nil
	case notify.ChannelPulse:
		return d.pulse != nil
	case notify.ChannelWebhook:
		return len(d.webhook.hooks) > 0
	}
	return false
}

// errNotConfigured is the reason of a notification to a channel hopper has
// no configuration for.
func errNotConfigured(channel string) error {
	return notify.Permanent(fmt.Errorf("the %s channel is not configured on this hopper", channel))
}

// Send delivers m, the notification id's message (event is the queue event
// that caused it, "" for one asked for through the API).
func (d *Deliverer) Send(ctx context.Context, id, event string, m *notify.Message) error {
	channel := m.Channel()
	if channel != "" && !d.Configured(channel) {
		return errNotConfigured(channel)
	}
	switch {
	case m.Email != nil:
		return d.smtp.send(ctx, id, m.Email)
	case m.Slack != nil:
		return d.slack.send(ctx, m.Slack)
	case m.Matrix != nil:
		return d.matrix.send(ctx, id, m.Matrix)
	case m.Webhook != nil:
		return d.webhook.send(ctx, id, event, m.Webhook)
	case m.Pulse != nil:
		return d.publish(ctx, m.Pulse)
	}
	return notify.Permanent(errors.New("a notification without a message"))
}

// publish sends a message on the notify exchange: routing key
// primary.<routingKey>, CC route.<routingKey>, body {message, version: 1}.
func (d *Deliverer) publish(ctx context.Context, p *notify.Pulse) error {
	msg := p.Message
	if len(msg) == 0 {
		msg = json.RawMessage(`{}`)
	}
	body, err := json.Marshal(struct {
		Message json.RawMessage `json:"message"`
		Version int             `json:"version"`
	}{msg, 1})
	if err != nil {
		return notify.Permanent(err)
	}
	m := events.Message{Exchange: NotificationExchange, RoutingKey: "primary." + p.RoutingKey, CC: []string{"route." + p.RoutingKey}, Body: body}
	if err := m.Validate(); err != nil {
		return notify.Permanent(err)
	}
	if err := d.pulse.Publish(ctx, m); err != nil {
		return fmt.Errorf("publishing on the notify exchange: %w", err)
	}
	return nil
}
