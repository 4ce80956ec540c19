package notify_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
)

func TestParseRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		route                    string
		ok                       bool
		channel, target, decider string
		wantErr                  string
	}{
		{"index.foo.bar", false, "", "", "", ""},
		{"notify.email.dev.team@example.com.on-failed", true, notify.ChannelEmail, "dev.team@example.com", "failed", ""},
		{"notify.pulse.my.topic.on-any", true, notify.ChannelPulse, "my.topic", "any", ""},
		{"notify.matrix-room.!abc:matrix.org.on-resolved", true, notify.ChannelMatrix, "!abc:matrix.org", "resolved", ""},
		{"notify.slack-channel.C0123ABC.on-transition", true, notify.ChannelSlack, "C0123ABC", "transition", ""},
		{"notify.slack.C0123ABC.on-exception", true, notify.ChannelSlack, "C0123ABC", "exception", ""},
		{"notify.webhook.nightly.on-defined", true, notify.ChannelWebhook, "nightly", "defined", ""},
		{"notify.irc-channel.#x.on-failed", true, "", "", "", ""}, // unknown channel: ignored
		{"notify.email.x@y.z.on-sometimes", true, notify.ChannelEmail, "x@y.z", "", "does not end with"},
		{"notify.email.not-an-address.on-failed", true, notify.ChannelEmail, "not-an-address", "failed", "not a plain email"},
		{"notify.email.a<b>@c.d.on-failed", true, notify.ChannelEmail, "a<b>@c.d", "failed", "not a plain email"},
		{"notify.matrix-room.#alias:x.org.on-failed", true, notify.ChannelMatrix, "#alias:x.org", "failed", "not a Matrix room"},
		{"notify.slack-channel.general.on-failed", true, notify.ChannelSlack, "general", "failed", "not a Slack channel"},
		{"notify.pulse.a.#.on-failed", true, notify.ChannelPulse, "a.#", "failed", "not a routing key"},
		{"notify.webhook.Bad Name.on-failed", true, notify.ChannelWebhook, "Bad Name", "failed", "not a webhook name"},
		{"notify.email.on-failed", true, notify.ChannelEmail, "", "", "is not notify."},
		{"notify.x", true, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.route, func(t *testing.T) {
			r, ok, err := notify.ParseRoute(tt.route)
			require.Equal(t, tt.ok, ok)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.channel, r.Channel)
			require.Equal(t, tt.target, r.Target)
			require.Equal(t, tt.decider, r.Decider)
		})
	}
}

func TestFires(t *testing.T) {
	t.Parallel()
	events := []string{queue.EventTaskDefined, queue.EventTaskPending, queue.EventTaskRunning,
		queue.EventTaskCompleted, queue.EventTaskFailed, queue.EventTaskException}
	want := map[string][]bool{
		"defined":    {true, false, false, false, false, false},
		"pending":    {false, true, false, false, false, false},
		"running":    {false, false, true, false, false, false},
		"completed":  {false, false, false, true, false, false},
		"failed":     {false, false, false, false, true, false},
		"exception":  {false, false, false, false, false, true},
		"resolved":   {false, false, false, true, true, true},
		"any":        {false, false, false, true, true, true},
		"transition": {true, true, true, true, true, true},
	}
	for decider, fires := range want {
		for i, ev := range events {
			require.Equal(t, fires[i], notify.Fires(decider, ev), "on-%s at %s", decider, ev)
		}
	}
	require.False(t, notify.Fires("transition", "artifact-created"))
}

func TestForEvents(t *testing.T) {
	t.Parallel()
	def := &queue.Task{Routes: []string{"index.x", "notify.email.a@b.org.on-failed", "notify.webhook.hook.on-transition",
		"notify.email.bad.on-resolved", "notify.other.x.on-failed"}}
	status := func(reason string) *queue.Status {
		return &queue.Status{State: "exception", Runs: []queue.Run{{RunID: 0, State: "exception", ReasonResolved: reason}}}
	}
	got := notify.ForEvents(def, []queue.Event{{Kind: queue.EventTaskFailed, RunID: 0}})
	require.Len(t, got, 3)
	require.Equal(t, "a@b.org", got[0].Route.Target)
	require.Empty(t, got[0].Refusal)
	require.Equal(t, "hook", got[1].Route.Target)
	require.Contains(t, got[2].Refusal, "not a plain email")

	got = notify.ForEvents(def, []queue.Event{{Kind: queue.EventTaskDefined, RunID: -1}, {Kind: queue.EventTaskPending, RunID: 0}})
	require.Len(t, got, 2, "only on-transition fires; the malformed route waits for an event that could fire it")
	require.Equal(t, queue.EventTaskDefined, got[0].Event)
	require.Equal(t, -1, got[0].RunID)

	require.Empty(t, notify.ForEvents(def, []queue.Event{{Kind: queue.EventTaskException, RunID: 0, Status: status("canceled")}}),
		"a cancelled task notifies nobody")
	require.Len(t, notify.ForEvents(def, []queue.Event{{Kind: queue.EventTaskException, RunID: 0, Status: status("worker-shutdown")}}), 2)
	require.Nil(t, notify.ForEvents(&queue.Task{Routes: []string{"index.a"}}, []queue.Event{{Kind: queue.EventTaskFailed}}))
}

func renderContext(channel, target string, extra string) notify.TaskContext {
	var raw json.RawMessage
	if extra != "" {
		raw = json.RawMessage(extra)
	}
	resolved := queue.NewTime(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))
	return notify.TaskContext{
		TaskID: "fN1SbArXTPCHDs8pNd6e3A",
		Task: &queue.Task{TaskGroupID: "gN1SbArXTPCHDs8pNd6e3A", Metadata: queue.Metadata{Name: "nightly <build>", Owner: "ci@example.com",
			Source: "https://example.com/ci", Description: "Builds *everything*"}, Extra: raw, Tags: map[string]string{"k": "v"}},
		Status: &queue.Status{TaskID: "fN1SbArXTPCHDs8pNd6e3A", State: "failed",
			Runs: []queue.Run{{RunID: 0, State: "failed", ReasonResolved: "failed", Resolved: &resolved}}},
		Event: queue.EventTaskFailed, RunID: 0, RootURL: "https://hopper.example/", LogTail: "step 3\nerror: <boom>",
		ID: "42", Now: time.Date(2026, 11, 26, 3, 0, 1, 0, time.UTC),
		Rule: notify.Route{Channel: channel, Target: target, Raw: "notify." + channel + "." + target + ".on-failed"},
	}
}

func TestRenderDefaults(t *testing.T) {
	t.Parallel()
	url := "https://hopper.example/ui/#/task/fN1SbArXTPCHDs8pNd6e3A"
	m, err := notify.Render(renderContext(notify.ChannelEmail, "a@b.org", ""))
	require.NoError(t, err)
	require.Equal(t, "a@b.org", m.Email.Address)
	require.Equal(t, "[hopper] nightly <build>: failed (fN1SbArXTPCHDs8pNd6e3A)", m.Email.Subject)
	require.Contains(t, m.Email.Content, "("+url+")")
	require.Contains(t, m.Email.Content, "error: <boom>", "the log's last lines")
	require.Equal(t, url, m.Email.Link.Href)
	html := notify.RenderMarkdown(m.Email.Content)
	require.Contains(t, html, `<a href="`+url+`">`)
	require.Contains(t, html, "error: &lt;boom&gt;")
	require.NotContains(t, html, "<build>")

	m, err = notify.Render(renderContext(notify.ChannelSlack, "C123", ""))
	require.NoError(t, err)
	require.Equal(t, ":x: *<"+url+"|nightly &lt;build&gt;>* is failed", m.Slack.Text)
	require.Contains(t, string(m.Slack.Blocks), "error: \\u003cboom\\u003e")

	m, err = notify.Render(renderContext(notify.ChannelMatrix, "!r:x.org", ""))
	require.NoError(t, err)
	require.Equal(t, "nightly <build> is failed: "+url, m.Matrix.Body)
	require.Equal(t, "m.notice", m.Matrix.Msgtype)
	require.Contains(t, m.Matrix.FormattedBody, "nightly &lt;build&gt;")

	m, err = notify.Render(renderContext(notify.ChannelPulse, "a.b", ""))
	require.NoError(t, err)
	require.Contains(t, string(m.Pulse.Message), `"state":"failed"`)

	m, err = notify.Render(renderContext(notify.ChannelWebhook, "hook", ""))
	require.NoError(t, err)
	var body notify.WebhookBody
	require.NoError(t, json.Unmarshal(m.Webhook.Body, &body))
	require.Equal(t, "42", body.ID)
	require.Equal(t, url, body.URL)
	require.Equal(t, "failed", body.Status.State)
}

func TestRenderOverrides(t *testing.T) {
	t.Parallel()
	extra := `{"notify": {
		"email": {"subject": "${task.metadata.name} is ${status.state}", "content": "see ${rootUrl}", "link": {"text": "go", "href": "https://x.org/${taskId}"}},
		"slackText": "custom ${status.state}", "slackBlocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "${taskId}"}}],
		"slackAttachments": [{"text": "att"}], "slackUnfurlLinks": true,
		"matrixBody": "mb ${status.state}", "matrixFormattedBody": "<b>${status.state}</b>", "matrixFormat": "org.matrix.custom.html", "matrixMsgtype": "m.text"}}`
	m, err := notify.Render(renderContext(notify.ChannelEmail, "a@b.org", extra))
	require.NoError(t, err)
	require.Equal(t, "nightly <build> is failed", m.Email.Subject)
	require.Equal(t, "see https://hopper.example/", m.Email.Content)
	require.Equal(t, &notify.Link{Text: "go", Href: "https://x.org/fN1SbArXTPCHDs8pNd6e3A"}, m.Email.Link)

	m, err = notify.Render(renderContext(notify.ChannelSlack, "C123", extra))
	require.NoError(t, err)
	require.Equal(t, "custom failed", m.Slack.Text)
	require.JSONEq(t, `[{"type":"section","text":{"type":"mrkdwn","text":"fN1SbArXTPCHDs8pNd6e3A"}}]`, string(m.Slack.Blocks))
	require.JSONEq(t, `[{"text":"att"}]`, string(m.Slack.Attachments))
	require.True(t, m.Slack.UnfurlLinks)
	require.False(t, m.Slack.UnfurlMedia)

	m, err = notify.Render(renderContext(notify.ChannelMatrix, "!r:x.org", extra))
	require.NoError(t, err)
	require.Equal(t, notify.Matrix{RoomID: "!r:x.org", Body: "mb failed", FormattedBody: "<b>failed</b>",
		Format: "org.matrix.custom.html", Msgtype: "m.text"}, *m.Matrix)

	m, err = notify.Render(renderContext(notify.ChannelEmail, "a@b.org", `{"notify": {"email": {"subject": {"$eval": "nope("}}}}`))
	require.NoError(t, err)
	require.Contains(t, m.Email.Subject, "could not be rendered", "a broken override says so in the message")
}

func TestRenderMarkdownEscapes(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"},
		{"**bold** and *em* and `<code>`", "<p><strong>bold</strong> and <em>em</em> and <code>&lt;code&gt;</code></p>\n"},
		{"[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>\n"},
		{`[x](https://a.org/?a=1&b="2")`, "<p><a href=\"https://a.org/?a=1&amp;b=&#34;2&#34;\">x</a></p>\n"},
		{"# Title\n- one\n- two\n\n```\n<raw>\n```", "<h1>Title</h1>\n<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n<pre><code>&lt;raw&gt;</code></pre>\n"},
		{"line one\nline two", "<p>line one<br>\nline two</p>\n"},
		{`\*not em\*`, "<p>*not em*</p>\n"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, notify.RenderMarkdown(tt.in), tt.in)
	}
}

func TestAfterAttempt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, notify.StateSent, notify.AfterAttempt(nil, 1, now, 0).State)
	o := notify.AfterAttempt(errors.New("connection refused"), 1, now, 0.5)
	require.Equal(t, notify.StatePending, o.State)
	require.Equal(t, now.Add(notify.FirstRetry), o.NextAttempt)
	o = notify.AfterAttempt(errors.New("x"), 3, now, 0.5)
	require.Equal(t, now.Add(4*notify.FirstRetry), o.NextAttempt)
	require.Equal(t, notify.MaxRetry, notify.Backoff(40, 0.5))
	o = notify.AfterAttempt(notify.Permanent(errors.New("550 no such user")), 1, now, 0)
	require.Equal(t, notify.Outcome{State: notify.StateFailed, Error: "550 no such user"}, o)
	o = notify.AfterAttempt(errors.New(strings.Repeat("x", 5000)), notify.MaxAttempts, now, 0)
	require.Equal(t, notify.StateFailed, o.State)
	require.Contains(t, o.Error, "gave up after 8 attempts")
	require.Less(t, len(o.Error), 1100)
}

func TestWebhookSignature(t *testing.T) {
	t.Parallel()
	secret, body := []byte("s3cret"), []byte(`{"id":"1"}`)
	at := time.Unix(1700000000, 0)
	sig := notify.SignWebhook(secret, at, body)
	require.Equal(t, "t=1700000000,v1=", sig[:16])
	require.NoError(t, notify.VerifyWebhook(secret, sig, body, at.Add(time.Minute), 5*time.Minute))
	require.ErrorContains(t, notify.VerifyWebhook(secret, sig, []byte(`{"id":"2"}`), at, 5*time.Minute), "does not match")
	require.ErrorContains(t, notify.VerifyWebhook([]byte("other"), sig, body, at, 5*time.Minute), "does not match")
	require.ErrorContains(t, notify.VerifyWebhook(secret, sig, body, at.Add(time.Hour), 5*time.Minute), "away from now")
	require.Error(t, notify.VerifyWebhook(secret, "v1=00", body, at, 5*time.Minute))
}

func TestTailLines(t *testing.T) {
	t.Parallel()
	log := []byte("a\nb\x1b[31m\nc\nd\n")
	require.Equal(t, "b[31m\nc\nd", notify.TailLines(log, 3, 100))
	require.Equal(t, "c\nd", notify.TailLines(log, 3, 4), "a line cut by the byte limit is left out")
}

// TestRenderHugeOverrides: overrides far larger than a channel takes are
// cut to its limits, on a rune boundary, with a mark.
func TestRenderHugeOverrides(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("é", 300*1024)
	extra := `{"notify": {"email": {"subject": "` + huge + `", "content": "` + huge + `"}, "slackText": "` + huge + `", "matrixBody": "` + huge + `"}}`
	m, err := notify.Render(renderContext(notify.ChannelEmail, "a@b.org", extra))
	require.NoError(t, err)
	require.LessOrEqual(t, len(m.Email.Subject), notify.MaxSubject)
	require.LessOrEqual(t, len(m.Email.Content), notify.MaxContent)
	require.True(t, strings.HasSuffix(m.Email.Content, "…"))
	require.True(t, utf8.ValidString(m.Email.Content))
	m, err = notify.Render(renderContext(notify.ChannelSlack, "C123", extra))
	require.NoError(t, err)
	require.LessOrEqual(t, len(m.Slack.Text), notify.MaxSlackText)
	m, err = notify.Render(renderContext(notify.ChannelMatrix, "!r:x.org", extra))
	require.NoError(t, err)
	require.LessOrEqual(t, len(m.Matrix.Body), notify.MaxMatrixBody)
	require.True(t, utf8.ValidString(m.Matrix.Body))
}

// TestDenylistKey: email addresses are compared without ASCII case, the
// local part too; other channels' addresses as given.
func TestDenylistKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ channel, address, want string }{
		{notify.ChannelEmail, "deny@example.com", "deny@example.com"},
		{notify.ChannelEmail, "DENY@example.com", "deny@example.com"},
		{notify.ChannelEmail, "Deny@Example.COM", "deny@example.com"},
		{notify.ChannelEmail, "Élan@Bücher.de", "Élan@bücher.de"},
		{notify.ChannelSlack, "C0ABC", "C0ABC"},
		{notify.ChannelMatrix, "!Room:Example.org", "!Room:Example.org"},
		{notify.ChannelPulse, "Builds.X", "Builds.X"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, notify.DenylistKey(tt.channel, tt.address), "%s %s", tt.channel, tt.address)
	}
}
