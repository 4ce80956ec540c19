package chattest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notifysend/chattest"
)

func do(t *testing.T, method, url, contentType, auth, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSlackRefuses: what Slack's description does not allow is refused.
func TestSlackRefuses(t *testing.T) {
	t.Parallel()
	s := chattest.NewSlack(t, "tok", "C1")
	s.Expect = true
	cases := []struct{ method, path, ct, body, want string }{
		{"POST", "/chat.postMessage", "application/json", `{"channel":"C1","text":"x","colour":"red"}`, `parameter "colour" is not in the description`},
		{"POST", "/chat.postMessage", "application/json", `{"text":"x"}`, "required parameter channel"},
		{"POST", "/chat.postMessage", "application/json", `{"channel":"C1","text":"x","unfurl_links":"maybe"}`, "not a boolean"},
		{"POST", "/chat.postMessage", "application/json", `{"channel":"C1","text":7}`, "not a string"},
		{"POST", "/chat.postMessage", "text/plain", `channel=C1`, "Content-Type"},
		{"GET", "/chat.postMessage", "", ``, "with GET"},
		{"POST", "/chat.update", "application/json", `{}`, "only chat.postMessage"},
	}
	for i, c := range cases {
		do(t, c.method, s.URL+c.path, c.ct, "tok", c.body)
		require.Len(t, s.Refusals(), i+1, c.want)
		require.Contains(t, s.Refusals()[i], c.want)
	}
	require.Equal(t, 200, do(t, "POST", s.URL+"/chat.postMessage", "application/x-www-form-urlencoded", "tok", "channel=C1&text=hi&mrkdwn=true"))
	require.Len(t, s.Refusals(), len(cases), "a form post the description allows")
	require.Len(t, s.Messages(), 1)
}

// TestMatrixRefuses: what the Matrix specification does not allow is
// refused.
func TestMatrixRefuses(t *testing.T) {
	t.Parallel()
	m := chattest.NewMatrix(t, "tok", "!r:localhost")
	m.Expect = true
	base := m.URL + "/_matrix/client/v3/rooms/%21r:localhost/send/m.room.message/"
	cases := []struct{ method, url, body, want string }{
		{"PUT", base + "t1", `{"msgtype":"m.notice"}`, "schema"},
		{"PUT", base + "t2", `{"msgtype":"m.notice","body":5}`, "schema"},
		{"PUT", base + "t3", `{"msgtype":"m.image","body":"x"}`, "msgtype"},
		{"PUT", base + "t4", `{"msgtype":"m.text","body":"x","format":"org.matrix.custom.html"}`, "together"},
		{"PUT", base + "t5", `{"msgtype":"m.text","body":"x","format":"markdown","formatted_body":"*x*"}`, "org.matrix.custom.html"},
		{"POST", base + "t6", `{"msgtype":"m.text","body":"x"}`, "not the send operation"},
		{"PUT", m.URL + "/_matrix/client/v3/rooms/%23alias:localhost/send/m.room.message/t7", `{"msgtype":"m.text","body":"x"}`, "does not match"},
	}
	for i, c := range cases {
		do(t, c.method, c.url, "application/json", "tok", c.body)
		require.GreaterOrEqual(t, len(m.Refusals()), i+1, c.want)
		require.Contains(t, m.Refusals()[len(m.Refusals())-1], c.want)
	}
	n := len(m.Refusals())
	require.Equal(t, 200, do(t, "PUT", base+"ok", "application/json", "tok", `{"msgtype":"m.emote","body":"waves"}`))
	require.Len(t, m.Refusals(), n)
	require.Len(t, m.Events(), 1)
}
