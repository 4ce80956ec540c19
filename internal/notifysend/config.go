// Package notifysend delivers notifications to their channels: email over
// SMTP (go-mail: implicit TLS, STARTTLS, authentication; a text and an HTML
// part), Slack (the Web API's chat.postMessage, or an incoming webhook per
// channel), Matrix (the client-server API's PUT
// /rooms/{roomId}/send/m.room.message/{txnId}, the notification's id as
// txnId), Pulse (the notify exchange) and signed webhooks. Each send either
// succeeds, fails for now (retried with back-off by the sender duty), or
// fails for good (notify.Permanent): a 4xx answer, an address the server
// refuses, a channel hopper is not configured for.
//
// The configuration comes from a file (YAML or JSON) the operator names;
// the secrets in it may instead come from the environment, never from
// flags.
package notifysend

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hopper-ci/hopper/internal/notify"
)

// Config configures the channels; a channel left out is off, and its
// notifications fail with a reason saying so.
type Config struct {
	SMTP     *SMTPConfig              `yaml:"smtp" json:"smtp"`
	Slack    *SlackConfig             `yaml:"slack" json:"slack"`
	Matrix   *MatrixConfig            `yaml:"matrix" json:"matrix"`
	Webhooks map[string]WebhookConfig `yaml:"webhooks" json:"webhooks"`
}

// SMTPConfig is the mail server email goes through.
type SMTPConfig struct {
	Host string `yaml:"host" json:"host"`
	Port int    `yaml:"port" json:"port"`
	// TLS is "starttls" (the default: STARTTLS required), "tls" (implicit
	// TLS, as on port 465), "opportunistic" (STARTTLS when offered) or
	// "none".
	TLS string `yaml:"tls" json:"tls"`
	// CAFile, if set, is a PEM file of the certificates to trust instead
	// of the system's (a private mail relay).
	CAFile   string `yaml:"caFile" json:"caFile"`
	Username string `yaml:"username" json:"username"`
	// Password, or HOPPER_NOTIFY_SMTP_PASSWORD.
	Password string `yaml:"password" json:"password"`
	// From is the sender's address, with an optional display name.
	From string `yaml:"from" json:"from"`
}

// SlackConfig is the Slack app hopper posts as.
type SlackConfig struct {
	// APIURL is the Web API's base (default https://slack.com/api).
	APIURL string `yaml:"apiUrl" json:"apiUrl"`
	// Token is a bot token (or HOPPER_NOTIFY_SLACK_TOKEN).
	Token string `yaml:"token" json:"token"`
	// Webhooks maps channel IDs to incoming-webhook URLs, used instead of
	// chat.postMessage for those channels (secrets: keep the file private).
	Webhooks map[string]string `yaml:"webhooks" json:"webhooks"`
}

// MatrixConfig is the Matrix account hopper posts as.
type MatrixConfig struct {
	// BaseURL is the homeserver's client-server API base, e.g.
	// https://matrix.example.org.
	BaseURL string `yaml:"baseUrl" json:"baseUrl"`
	// AccessToken, or HOPPER_NOTIFY_MATRIX_TOKEN.
	AccessToken string `yaml:"accessToken" json:"accessToken"`
}

// WebhookConfig is one endpoint notify.webhook.<name> routes post to.
type WebhookConfig struct {
	URL string `yaml:"url" json:"url"`
	// Secret signs each delivery (or HOPPER_NOTIFY_WEBHOOK_<NAME>_SECRET,
	// the name in capitals with - as _).
	Secret string `yaml:"secret" json:"secret"`
}

// LoadConfig reads the configuration at path ("" for none: only what the
// environment names) and fills its secrets from getenv.
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	cfg := &Config{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the notify configuration: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(cfg); err != nil {
			return nil, fmt.Errorf("reading the notify configuration %s: %w", path, err)
		}
	}
	if cfg.SMTP != nil {
		if v := getenv("HOPPER_NOTIFY_SMTP_PASSWORD"); v != "" {
			cfg.SMTP.Password = v
		}
	}
	if cfg.Slack != nil {
		if v := getenv("HOPPER_NOTIFY_SLACK_TOKEN"); v != "" {
			cfg.Slack.Token = v
		}
	}
	if cfg.Matrix != nil {
		if v := getenv("HOPPER_NOTIFY_MATRIX_TOKEN"); v != "" {
			cfg.Matrix.AccessToken = v
		}
	}
	for name, w := range cfg.Webhooks {
		if v := getenv(WebhookSecretEnv(name)); v != "" {
			w.Secret = v
			cfg.Webhooks[name] = w
		}
	}
	return cfg, cfg.Validate()
}

// WebhookSecretEnv is the environment variable holding a webhook's secret.
func WebhookSecretEnv(name string) string {
	return "HOPPER_NOTIFY_WEBHOOK_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_SECRET"
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if s := c.SMTP; s != nil {
		if s.Host == "" || s.From == "" {
			errs = append(errs, errors.New("smtp needs a host and a from address"))
		}
		switch s.TLS {
		case "", "starttls", "tls", "opportunistic", "none":
		default:
			errs = append(errs, fmt.Errorf("smtp tls %q is not one of starttls, tls, opportunistic, none", s.TLS))
		}
	}
	if s := c.Slack; s != nil && s.Token == "" && len(s.Webhooks) == 0 {
		errs = append(errs, errors.New("slack needs a token or incoming webhooks"))
	}
	if m := c.Matrix; m != nil && (m.BaseURL == "" || m.AccessToken == "") {
		errs = append(errs, errors.New("matrix needs a baseUrl and an access token"))
	}
	names := make([]string, 0, len(c.Webhooks))
	for name := range c.Webhooks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w := c.Webhooks[name]
		if err := notify.ValidateTarget(notify.ChannelWebhook, name); err != nil {
			errs = append(errs, err)
		}
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("webhook %s: url %q is not an http(s) URL", name, w.URL))
		}
		if len(w.Secret) < 16 {
			errs = append(errs, fmt.Errorf("webhook %s needs a secret of at least 16 characters (or %s)", name, WebhookSecretEnv(name)))
		}
	}
	return errors.Join(errs...)
}

// tlsConfig is the TLS configuration for the SMTP server.
func (s *SMTPConfig) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{ServerName: s.Host, MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the SMTP server's CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
