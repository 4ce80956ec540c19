package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/jsone"
	"github.com/hopper-ci/hopper/internal/queue"
)

// Message is one notification ready to send: exactly one of its channel
// fields is set. The outbox stores it as JSON for notifications asked for
// through the API; a task's notifications are rendered by Render when they
// are sent.
type Message struct {
	Email   *Email   `json:"email,omitempty"`
	Pulse   *Pulse   `json:"pulse,omitempty"`
	Matrix  *Matrix  `json:"matrix,omitempty"`
	Slack   *Slack   `json:"slack,omitempty"`
	Webhook *Webhook `json:"webhook,omitempty"`
}

// Channel names the channel of m.
func (m *Message) Channel() string {
	switch {
	case m.Email != nil:
		return ChannelEmail
	case m.Pulse != nil:
		return ChannelPulse
	case m.Matrix != nil:
		return ChannelMatrix
	case m.Slack != nil:
		return ChannelSlack
	case m.Webhook != nil:
		return ChannelWebhook
	}
	return ""
}

// Target is the address m goes to.
func (m *Message) Target() string {
	switch {
	case m.Email != nil:
		return m.Email.Address
	case m.Pulse != nil:
		return m.Pulse.RoutingKey
	case m.Matrix != nil:
		return m.Matrix.RoomID
	case m.Slack != nil:
		return m.Slack.ChannelID
	case m.Webhook != nil:
		return m.Webhook.Name
	}
	return ""
}

// Email is an email: Content is markdown, sent as the text part and, rendered
// (RenderMarkdown), as the HTML part.
type Email struct {
	Address  string `json:"address"`
	Subject  string `json:"subject"`
	Content  string `json:"content"`
	Link     *Link  `json:"link,omitempty"`
	ReplyTo  string `json:"replyTo,omitempty"`
	Template string `json:"template,omitempty"` // simple or fullscreen
}

// Link is a button under an email's content.
type Link struct {
	Text string `json:"text"`
	Href string `json:"href"`
}

// Pulse is a message published on the notify exchange.
type Pulse struct {
	RoutingKey string          `json:"routingKey"`
	Message    json.RawMessage `json:"message"`
}

// Matrix is an m.room.message event.
type Matrix struct {
	RoomID        string `json:"roomId"`
	Body          string `json:"body"`
	Format        string `json:"format,omitempty"`
	FormattedBody string `json:"formattedBody,omitempty"`
	Msgtype       string `json:"msgtype,omitempty"`
}

// Slack is a chat.postMessage call.
type Slack struct {
	ChannelID   string          `json:"channelId"`
	Text        string          `json:"text"`
	Blocks      json.RawMessage `json:"blocks,omitempty"`
	Attachments json.RawMessage `json:"attachments,omitempty"`
	UnfurlLinks bool            `json:"unfurlLinks,omitempty"`
	UnfurlMedia bool            `json:"unfurlMedia,omitempty"`
}

// Webhook is a signed POST of Body to the configured endpoint Name.
type Webhook struct {
	Name string          `json:"name"`
	Body json.RawMessage `json:"body"`
}

// Limits on what a rendered message may carry, so that a task's override
// cannot make a message its channel refuses or a row of megabytes.
const (
	MaxSubject     = 255
	MaxContent     = 100 * 1024
	MaxSlackText   = 3000 // a section block's text
	MaxMatrixBody  = 32 * 1024
	MaxLogTailSize = 4 * 1024 // the log lines quoted in a message
	// LogTailLines is how many of the log's last lines a message quotes.
	LogTailLines = 20
)

// TaskContext is what a task notification is rendered from.
type TaskContext struct {
	TaskID  string
	Task    *queue.Task
	Status  *queue.Status // as the event announced it
	Event   string        // the queue event's kind
	RunID   int
	RootURL string
	// LogTail holds the last lines of the run's log, when they could be read.
	LogTail string
	// ID is the notification's id in the outbox (the webhook's delivery id).
	ID   string
	Now  time.Time
	Rule Route
}

// TaskURL is the task's page in hopper's console.
func TaskURL(rootURL, taskID string) string {
	return strings.TrimRight(rootURL, "/") + "/ui/#/task/" + taskID
}

// GroupURL is the task group's page in hopper's console.
func GroupURL(rootURL, taskGroupID string) string {
	return strings.TrimRight(rootURL, "/") + "/ui/#/group/" + taskGroupID
}

// Render builds the message of a task notification for its route's
// channel: the default message, with the overrides of the task's
// extra.notify applied. An override that fails to render yields a message
// saying why, in its place, so the notification still goes out.
func Render(tc TaskContext) (*Message, error) {
	jctx, err := tc.jsoneContext()
	if err != nil {
		return nil, err
	}
	r := &renderer{tc: tc, extra: extraNotify(tc.Task), jctx: jctx, url: TaskURL(tc.RootURL, tc.TaskID)}
	switch tc.Rule.Channel {
	case ChannelEmail:
		return &Message{Email: r.email()}, nil
	case ChannelSlack:
		return &Message{Slack: r.slack()}, nil
	case ChannelMatrix:
		return &Message{Matrix: r.matrix()}, nil
	case ChannelPulse:
		st, err := json.Marshal(tc.Status)
		if err != nil {
			return nil, fmt.Errorf("encoding the status of %s: %w", tc.TaskID, err)
		}
		return &Message{Pulse: &Pulse{RoutingKey: tc.Rule.Target, Message: st}}, nil
	case ChannelWebhook:
		return r.webhook()
	}
	return nil, fmt.Errorf("unknown channel %q", tc.Rule.Channel)
}

// renderer renders one notification: the task's extra.notify overrides,
// JSON-e templates rendered in jctx.
type renderer struct {
	tc    TaskContext
	extra map[string]any
	jctx  map[string]any
	url   string // the task's page
}

// override renders extra.notify.<key>, if the task has it.
func (r *renderer) override(key string) (any, bool) {
	tmpl, ok := r.extra[key]
	if !ok {
		return nil, false
	}
	v, err := jsone.RenderAt(tmpl, r.jctx, r.tc.Now)
	if err != nil {
		return "The task's extra.notify." + key + " could not be rendered: " + err.Error(), true
	}
	return v, true
}

// textOf is a rendered value as text: a string as it is, anything else
// as its JSON.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// rawJSON is a rendered value as JSON (nil if it has none).
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// email is the email: the default one, with extra.notify.email's subject,
// content, link and template rendered over it.
func (r *renderer) email() *Email {
	tc := r.tc
	e := &Email{Address: tc.Rule.Target, Subject: defaultSubject(tc), Content: defaultEmailContent(tc),
		Link: &Link{Text: "Open the task", Href: r.url}, Template: "simple"}
	if em, ok := r.extra["email"].(map[string]any); ok {
		for key, tmpl := range em {
			v, err := jsone.RenderAt(tmpl, r.jctx, tc.Now)
			if err != nil {
				v = "The task's extra.notify.email." + key + " could not be rendered: " + err.Error()
			}
			switch key {
			case "subject":
				e.Subject = textOf(v)
			case "content":
				e.Content = textOf(v)
			case "link":
				if m, ok := v.(map[string]any); ok {
					text, _ := m["text"].(string)
					href, _ := m["href"].(string)
					if text != "" && href != "" {
						e.Link = &Link{Text: truncate(text, 40), Href: truncate(href, 1024)}
					}
				} else if v == nil {
					e.Link = nil
				}
			case "template":
				if s := textOf(v); s == "simple" || s == "fullscreen" {
					e.Template = s
				}
			}
		}
	}
	e.Subject = truncate(strings.Join(strings.Fields(e.Subject), " "), MaxSubject)
	e.Content = truncate(e.Content, MaxContent)
	return e
}

// slack is the Slack message: the default text and blocks, or the task's
// slackText, slackBlocks and slackAttachments.
func (r *renderer) slack() *Slack {
	tc := r.tc
	s := &Slack{ChannelID: tc.Rule.Target, Text: fmt.Sprintf("%s *<%s|%s>* is %s", slackEmoji(tc.Status.State), r.url,
		slackEscape(tc.Task.Metadata.Name), describeState(tc))}
	if v, ok := r.override("slackText"); ok {
		s.Text = textOf(v)
	}
	s.Text = truncate(s.Text, MaxSlackText)
	s.Blocks = defaultSlackBlocks(tc, s.Text)
	if v, ok := r.override("slackBlocks"); ok {
		if _, isList := v.([]any); isList {
			s.Blocks = rawJSON(v)
		} else {
			s.Text = truncate(textOf(v), MaxSlackText)
		}
	}
	if v, ok := r.override("slackAttachments"); ok {
		if _, isList := v.([]any); isList {
			s.Attachments = rawJSON(v)
		}
	}
	s.UnfurlLinks = r.extra["slackUnfurlLinks"] == true
	s.UnfurlMedia = r.extra["slackUnfurlMedia"] == true
	return s
}

// matrix is the Matrix message: the default body and HTML, or the task's
// matrixBody, matrixFormattedBody, matrixFormat and matrixMsgtype.
func (r *renderer) matrix() *Matrix {
	tc := r.tc
	m := &Matrix{RoomID: tc.Rule.Target, Msgtype: "m.notice",
		Body:          fmt.Sprintf("%s is %s: %s", tc.Task.Metadata.Name, describeState(tc), r.url),
		Format:        "org.matrix.custom.html",
		FormattedBody: defaultMatrixHTML(tc, r.url)}
	if v, ok := r.extra["matrixMsgtype"].(string); ok && (v == "m.notice" || v == "m.text" || v == "m.emote") {
		m.Msgtype = v
	}
	if v, ok := r.extra["matrixFormat"].(string); ok {
		m.Format = v
	}
	if v, ok := r.override("matrixBody"); ok {
		m.Body = textOf(v)
		if _, has := r.extra["matrixFormattedBody"]; !has {
			// A custom body replaces the default formatted one too, or
			// clients would show the default instead of it.
			m.Format, m.FormattedBody = "", ""
		}
	}
	if v, ok := r.override("matrixFormattedBody"); ok {
		m.FormattedBody = textOf(v)
		if m.Format == "" {
			m.Format = "org.matrix.custom.html"
		}
	}
	m.Body, m.FormattedBody = truncate(m.Body, MaxMatrixBody), truncate(m.FormattedBody, MaxMatrixBody)
	return m
}

// webhook is the webhook's body (WebhookBody).
func (r *renderer) webhook() (*Message, error) {
	tc := r.tc
	body, err := json.Marshal(WebhookBody{
		ID: tc.ID, Event: tc.Event, Route: tc.Rule.Raw, TaskID: tc.TaskID, RunID: tc.RunID, Status: tc.Status,
		Task: WebhookTask{Name: tc.Task.Metadata.Name, Description: tc.Task.Metadata.Description, Owner: tc.Task.Metadata.Owner,
			Source: tc.Task.Metadata.Source, TaskGroupID: tc.Task.TaskGroupID, Tags: tc.Task.Tags},
		URL: r.url, LogTail: tc.LogTail,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the webhook body of %s: %w", tc.TaskID, err)
	}
	return &Message{Webhook: &Webhook{Name: tc.Rule.Target, Body: body}}, nil
}

// WebhookBody is the JSON a webhook endpoint receives for a task
// notification (docs/notify.md).
type WebhookBody struct {
	ID      string        `json:"id"`    // the delivery's id: the same on every retry
	Event   string        `json:"event"` // task-defined … task-exception
	Route   string        `json:"route"`
	TaskID  string        `json:"taskId"`
	RunID   int           `json:"runId"`
	Status  *queue.Status `json:"status"`
	Task    WebhookTask   `json:"task"`
	URL     string        `json:"url"`
	LogTail string        `json:"logTail,omitempty"`
}

// WebhookTask is the part of the task definition a webhook body carries.
type WebhookTask struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Owner       string            `json:"owner"`
	Source      string            `json:"source"`
	TaskGroupID string            `json:"taskGroupId"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// extraNotify returns the task's extra.notify object, if any.
func extraNotify(def *queue.Task) map[string]any {
	if len(def.Extra) == 0 {
		return nil
	}
	var extra struct {
		Notify map[string]any `json:"notify"`
	}
	if json.Unmarshal(def.Extra, &extra) != nil {
		return nil
	}
	return extra.Notify
}

// jsoneContext is the context the overrides render with: task, status,
// taskId and rootUrl, as in Taskcluster.
func (tc TaskContext) jsoneContext() (map[string]any, error) {
	asValue := func(v any) (any, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		var out any
		return out, json.Unmarshal(b, &out)
	}
	task, err := asValue(tc.Task)
	if err != nil {
		return nil, fmt.Errorf("encoding task %s for its notification: %w", tc.TaskID, err)
	}
	status, err := asValue(tc.Status)
	if err != nil {
		return nil, fmt.Errorf("encoding the status of %s for its notification: %w", tc.TaskID, err)
	}
	return map[string]any{"task": task, "status": status, "taskId": tc.TaskID, "rootUrl": tc.RootURL}, nil
}

// describeState says what the event means: "completed", "failed",
// "exception (worker-shutdown)", "running on group/worker", …
func describeState(tc TaskContext) string {
	st := tc.Status
	var last *queue.Run
	if n := len(st.Runs); n > 0 {
		last = &st.Runs[n-1]
	}
	switch tc.Event {
	case queue.EventTaskDefined:
		return "defined"
	case queue.EventTaskException:
		if last != nil && last.ReasonResolved != "" {
			return "resolved as exception (" + last.ReasonResolved + ")"
		}
		return "resolved as exception"
	case queue.EventTaskCompleted, queue.EventTaskFailed:
		return st.State
	case queue.EventTaskRunning:
		if last != nil && last.WorkerID != "" {
			return "running on " + last.WorkerGroup + "/" + last.WorkerID
		}
	}
	return st.State
}

func defaultSubject(tc TaskContext) string {
	return fmt.Sprintf("[hopper] %s: %s (%s)", tc.Task.Metadata.Name, describeState(tc), tc.TaskID)
}

// defaultEmailContent is the default email, as markdown.
func defaultEmailContent(tc TaskContext) string {
	var b strings.Builder
	runs := len(tc.Status.Runs)
	fmt.Fprintf(&b, "**%s** is %s.\n\n", mdEscape(tc.Task.Metadata.Name), mdEscape(describeState(tc)))
	fmt.Fprintf(&b, "- Task: [%s](%s)", tc.TaskID, TaskURL(tc.RootURL, tc.TaskID))
	if tc.RunID >= 0 {
		fmt.Fprintf(&b, ", run %d of %d", tc.RunID, runs)
	}
	fmt.Fprintf(&b, "\n- Task group: [%s](%s)\n", tc.Task.TaskGroupID, GroupURL(tc.RootURL, tc.Task.TaskGroupID))
	fmt.Fprintf(&b, "- Owner: %s\n- Source: %s\n", mdEscape(tc.Task.Metadata.Owner), mdEscape(tc.Task.Metadata.Source))
	if d := strings.TrimSpace(tc.Task.Metadata.Description); d != "" {
		fmt.Fprintf(&b, "\n%s\n", mdEscape(d))
	}
	if tc.LogTail != "" {
		fmt.Fprintf(&b, "\nThe last lines of the log:\n\n```\n%s\n```\n", strings.ReplaceAll(tc.LogTail, "```", "'''"))
	}
	return b.String()
}

func defaultSlackBlocks(tc TaskContext, text string) json.RawMessage {
	blocks := []any{
		map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}},
		map[string]any{"type": "context", "elements": []any{map[string]any{"type": "mrkdwn",
			"text": fmt.Sprintf("Task group <%s|%s>", GroupURL(tc.RootURL, tc.Task.TaskGroupID), tc.Task.TaskGroupID)}}},
	}
	if tc.LogTail != "" {
		blocks = append(blocks, map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn",
			"text": truncate("```"+strings.ReplaceAll(tc.LogTail, "```", "'''")+"```", MaxSlackText)}})
	}
	b, _ := json.Marshal(blocks)
	return b
}

func defaultMatrixHTML(tc TaskContext, url string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<a href="%s">%s</a> is %s`, htmlEscape(url), htmlEscape(tc.Task.Metadata.Name), htmlEscape(describeState(tc)))
	if tc.LogTail != "" {
		fmt.Fprintf(&b, "<pre><code>%s</code></pre>", htmlEscape(tc.LogTail))
	}
	return b.String()
}

func slackEmoji(state string) string {
	switch state {
	case queue.StateCompleted:
		return ":white_check_mark:"
	case queue.StateFailed:
		return ":x:"
	case queue.StateException:
		return ":warning:"
	case queue.StateRunning:
		return ":gear:"
	case queue.StatePending:
		return ":hourglass_flowing_sand:"
	}
	return ":information_source:"
}

// slackEscape escapes the three characters Slack's mrkdwn gives meaning.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// mdEscape keeps a task's own text from being read as markdown.
func mdEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// TailLines returns the last n lines of a log, at most max bytes of them,
// with control characters other than tab removed.
func TailLines(log []byte, n, max int) string {
	s := strings.TrimRight(string(log), "\n")
	if len(s) > max {
		s = s[len(s)-max:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, "\n")
	out = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || (r >= ' ' && r != 0x7f && r != utf8.RuneError) {
			return r
		}
		return -1
	}, out)
	return out
}
