package notifysend

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/mail"
	"strings"

	gomail "github.com/wneessen/go-mail"

	"github.com/hopper-ci/hopper/internal/notify"
)

// smtpSender sends email through one SMTP server, a connection per send.
type smtpSender struct {
	cfg    SMTPConfig
	domain string // of the From address: the Message-ID's right side
	opts   []gomail.Option
}

func newSMTP(cfg SMTPConfig) (*smtpSender, error) {
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("smtp from address %q: %w", cfg.From, err)
	}
	_, domain, _ := strings.Cut(from.Address, "@")
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	opts := []gomail.Option{gomail.WithTimeout(notify.SendTimeout), gomail.WithTLSConfig(tlsCfg), gomail.WithHELO("hopper")}
	port := cfg.Port
	switch cfg.TLS {
	case "tls":
		opts = append(opts, gomail.WithSSL())
		if port == 0 {
			port = 465
		}
	case "none":
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	case "opportunistic":
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if port == 0 {
		port = 587
	}
	opts = append(opts, gomail.WithPort(port))
	if cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(cfg.Username), gomail.WithPassword(cfg.Password))
	}
	return &smtpSender{cfg: cfg, domain: domain, opts: opts}, nil
}

// send delivers one email. Its Message-ID is derived from the
// notification's id, so a message sent twice (a sender that died before
// recording the first send) carries the same id, which mail clients and
// many servers use to drop the copy.
func (s *smtpSender) send(ctx context.Context, id string, e *notify.Email) error {
	if err := notify.ValidateEmail(e.Address); err != nil {
		return notify.Permanent(err)
	}
	m := gomail.NewMsg()
	if err := m.From(s.cfg.From); err != nil {
		return notify.Permanent(fmt.Errorf("from address: %w", err))
	}
	if err := m.To(e.Address); err != nil {
		return notify.Permanent(fmt.Errorf("to address: %w", err))
	}
	if e.ReplyTo != "" {
		if err := m.ReplyTo(e.ReplyTo); err != nil {
			return notify.Permanent(fmt.Errorf("reply-to address: %w", err))
		}
	}
	m.Subject(e.Subject)
	m.SetMessageIDWithValue(id + "@" + s.domain)
	m.SetDate()
	m.SetGenHeader("X-Hopper-Notification", id)
	m.SetBodyString(gomail.TypeTextPlain, textBody(e))
	m.AddAlternativeString(gomail.TypeTextHTML, htmlBody(e))
	c, err := gomail.NewClient(s.cfg.Host, s.opts...)
	if err != nil {
		return notify.Permanent(fmt.Errorf("smtp client: %w", err))
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		var se *gomail.SendError
		if errors.As(err, &se) && !se.IsTemp() && se.ErrorCode() >= 500 {
			return notify.Permanent(fmt.Errorf("the mail server refused the message: %w", err))
		}
		return fmt.Errorf("sending email through %s: %w", s.cfg.Host, err)
	}
	return nil
}

// textBody is the text part: the markdown itself, then the link.
func textBody(e *notify.Email) string {
	body := e.Content
	if e.Link != nil {
		body += "\n\n" + e.Link.Text + ": " + e.Link.Href + "\n"
	}
	return body
}

// htmlBody is the HTML part: the rendered markdown in a plain layout, with
// the link as a button; "fullscreen" drops the card around it.
func htmlBody(e *notify.Email) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>")
	b.WriteString(html.EscapeString(e.Subject))
	b.WriteString("</title></head>\n")
	card := `max-width:640px;margin:24px auto;padding:24px;border:1px solid #ddd;border-radius:6px;`
	if e.Template == "fullscreen" {
		card = `margin:0;padding:24px;`
	}
	b.WriteString(`<body style="font-family:sans-serif;line-height:1.5;color:#222;background:#fafafa"><div style="` + card + `background:#fff">` + "\n")
	b.WriteString(notify.RenderMarkdown(e.Content))
	if e.Link != nil {
		b.WriteString(`<p><a href="` + html.EscapeString(e.Link.Href) + `" style="display:inline-block;padding:8px 16px;background:#2d6cdf;color:#fff;border-radius:4px;text-decoration:none">` +
			html.EscapeString(e.Link.Text) + "</a></p>\n")
	}
	b.WriteString("</div></body></html>\n")
	return b.String()
}
