package notifysend_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifysend"
	"github.com/hopper-ci/hopper/internal/notifysend/mailpittest"
)

func emailMessage(to string) *notify.Message {
	return &notify.Message{Email: &notify.Email{Address: to, Subject: "Nightly <build> failed",
		Content: "**Failed** at step 3.\n\n```\nerror: <boom>\n```\n", ReplyTo: "team@example.com",
		Link: &notify.Link{Text: "Open the task", Href: "https://hopper.example/ui/#/task/abc"}}}
}

func smtpDeliverer(t *testing.T, cfg notifysend.SMTPConfig) *notifysend.Deliverer {
	t.Helper()
	d, err := notifysend.New(&notifysend.Config{SMTP: &cfg}, notifysend.Options{})
	require.NoError(t, err)
	return d
}

// TestSMTPModes sends through a real SMTP server (Mailpit) with STARTTLS,
// implicit TLS and none, with and without authentication, and reads the
// message back: the subject, both parts, the link, Reply-To and the
// Message-ID made from the notification's id.
func TestSMTPModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"starttls", "tls", "none"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			opts := mailpittest.Options{TLS: mode, Username: "hopper", Password: "s3cret-pass"}
			if mode == "none" {
				opts = mailpittest.Options{}
			}
			srv := mailpittest.Start(t, opts)
			cfg := notifysend.SMTPConfig{Host: "127.0.0.1", Port: srv.SMTPPort, TLS: mode, CAFile: srv.CAFile,
				Username: opts.Username, Password: opts.Password, From: "Hopper <hopper@ci.example>"}
			d := smtpDeliverer(t, cfg)
			require.NoError(t, d.Send(context.Background(), "01234567-id", "task-failed", emailMessage("dev@example.com")))
			list := srv.Messages(t)
			require.Len(t, list, 1)
			m := srv.Message(t, list[0].ID)
			require.Equal(t, "Nightly <build> failed", m.Subject)
			require.Equal(t, "dev@example.com", m.To[0].Address)
			require.Equal(t, "hopper@ci.example", m.From.Address)
			require.Equal(t, "team@example.com", m.ReplyTo[0].Address)
			require.Equal(t, "01234567-id@ci.example", m.MessageID)
			require.Contains(t, m.Text, "**Failed** at step 3.")
			require.Contains(t, m.Text, "Open the task: https://hopper.example/ui/#/task/abc")
			require.Contains(t, m.HTML, "<strong>Failed</strong>")
			require.Contains(t, m.HTML, "error: &lt;boom&gt;")
			require.Contains(t, m.HTML, `href="https://hopper.example/ui/#/task/abc"`)
			require.NotContains(t, m.HTML, "<boom>")

			// A wrong password is refused by the server; without TLS,
			// no password is sent at all.
			bad := cfg
			bad.Username, bad.Password = "hopper", "wrong"
			err := smtpDeliverer(t, bad).Send(context.Background(), "x", "", emailMessage("dev@example.com"))
			require.Error(t, err)
			require.Len(t, srv.Messages(t), 1)
		})
	}
}

// TestSMTPFailures: a server answering 4xx is retried later, 5xx fails
// for good, an unreachable server is retried, a plain server where
// STARTTLS is required is not used, and a malformed address is never sent.
func TestSMTPFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var perm *notify.PermanentError

	busy := mailpittest.Start(t, mailpittest.Options{Chaos: "Recipient:451:100"})
	err := smtpDeliverer(t, notifysend.SMTPConfig{Host: "127.0.0.1", Port: busy.SMTPPort, TLS: "none", From: "h@ci.example"}).
		Send(ctx, "a", "", emailMessage("dev@example.com"))
	require.Error(t, err)
	require.False(t, errors.As(err, &perm), "451 is retried: %v", err)

	refusing := mailpittest.Start(t, mailpittest.Options{Chaos: "Recipient:550:100"})
	err = smtpDeliverer(t, notifysend.SMTPConfig{Host: "127.0.0.1", Port: refusing.SMTPPort, TLS: "none", From: "h@ci.example"}).
		Send(ctx, "a", "", emailMessage("dev@example.com"))
	require.ErrorAs(t, err, &perm, "550 fails for good")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	err = smtpDeliverer(t, notifysend.SMTPConfig{Host: "127.0.0.1", Port: port, TLS: "none", From: "h@ci.example"}).
		Send(ctx, "a", "", emailMessage("dev@example.com"))
	require.Error(t, err)
	require.False(t, errors.As(err, &perm), "an unreachable server is retried: %v", err)

	plain := mailpittest.Start(t, mailpittest.Options{})
	err = smtpDeliverer(t, notifysend.SMTPConfig{Host: "127.0.0.1", Port: plain.SMTPPort, TLS: "starttls", From: "h@ci.example"}).
		Send(ctx, "a", "", emailMessage("dev@example.com"))
	require.Error(t, err, "STARTTLS required but not offered")
	require.Empty(t, plain.Messages(t))

	err = smtpDeliverer(t, notifysend.SMTPConfig{Host: "127.0.0.1", Port: plain.SMTPPort, TLS: "none", From: "h@ci.example"}).
		Send(ctx, "a", "", emailMessage("dev@example.com\r\nBcc: x@evil.example"))
	require.ErrorAs(t, err, &perm)
	require.Empty(t, plain.Messages(t))
	require.True(t, strings.Contains(err.Error(), "plain email address"), err.Error())
}

func TestConfigSecretsFromEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := dir + "/notify.yml"
	require.NoError(t, writeFile(path, `
smtp: {host: mail.example, from: ci@example.com, username: ci}
webhooks:
  nightly-chat: {url: "https://chat.example/hook"}
`))
	env := map[string]string{"HOPPER_NOTIFY_SMTP_PASSWORD": "pw", "HOPPER_NOTIFY_WEBHOOK_NIGHTLY_CHAT_SECRET": "0123456789abcdef0123"}
	cfg, err := notifysend.LoadConfig(path, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "pw", cfg.SMTP.Password)
	require.Equal(t, "0123456789abcdef0123", cfg.Webhooks["nightly-chat"].Secret)
	_, err = notifysend.LoadConfig(path, func(string) string { return "" })
	require.ErrorContains(t, err, "HOPPER_NOTIFY_WEBHOOK_NIGHTLY_CHAT_SECRET")
	require.NoError(t, writeFile(path, "smtp: {host: x, from: y, pasword: typo}\n"))
	_, err = notifysend.LoadConfig(path, func(string) string { return "" })
	require.ErrorContains(t, err, "pasword", "unknown keys are refused")
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
