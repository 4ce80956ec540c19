// Package chattest serves local stand-ins for Slack and a Matrix
// homeserver that check every request against the services' published API
// descriptions, for tests where the real services cannot run. Slack's
// chat.postMessage is checked against its operation in Slack's OpenAPI
// description (testdata/slack-chat.postMessage.json, from
// slackapi/slack-api-specs); Matrix's PUT
// /rooms/{roomId}/send/m.room.message/{txnId} against the Matrix
// specification's operation and the m.room.message content schemas
// (testdata/matrix-room-send.json, from matrix-org/matrix-spec). A request
// the description does not allow fails the test; an allowed one is
// answered as the service documents it, and kept.
package chattest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed testdata/slack-chat.postMessage.json
var slackSpec []byte

//go:embed testdata/matrix-room-send.json
var matrixSpec []byte

// recorder keeps what a server accepted and what it refused.
type recorder struct {
	mu       sync.Mutex
	t        testing.TB
	refusals []string
	// Expect, when set, says refusals are what the test is after: they
	// are only recorded, and do not fail it.
	Expect bool
}

// refuse records a request the description does not allow: the test fails.
func (r *recorder) refuse(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	r.refusals = append(r.refusals, msg)
	if !r.Expect {
		r.t.Errorf("request not allowed by the published API description: %s", msg)
	}
}

// Refusals lists the requests refused so far.
func (r *recorder) Refusals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.refusals)
}

// SlackMessage is a message Slack accepted.
type SlackMessage struct {
	Channel string
	Params  map[string]any // the call's parameters as sent
	Webhook bool           // came through an incoming webhook
}

// Slack is the Slack stand-in.
type Slack struct {
	recorder
	URL   string // the Web API's base (…/api)
	Token string
	// Channels the bot may post in; others answer channel_not_found.
	Channels []string
	// RateLimited, while set, answers 429 with Retry-After.
	RateLimited bool

	op       slackOperation
	messages []SlackMessage
	ts       int
}

type slackOperation struct {
	Consumes   []string `json:"consumes"`
	Parameters []struct {
		In       string `json:"in"`
		Name     string `json:"name"`
		Required bool   `json:"required"`
		Type     string `json:"type"`
	} `json:"parameters"`
	Responses map[string]struct {
		Schema struct {
			Properties struct {
				Error struct {
					Enum []string `json:"enum"`
				} `json:"error"`
			} `json:"properties"`
		} `json:"schema"`
	} `json:"responses"`
}

// NewSlack starts a Slack stand-in for the test. Its incoming webhooks are
// at WebhookURL(channel).
func NewSlack(t testing.TB, token string, channels ...string) *Slack {
	t.Helper()
	var spec struct {
		Operation slackOperation `json:"operation"`
	}
	if err := json.Unmarshal(slackSpec, &spec); err != nil {
		t.Fatalf("reading Slack's description: %v", err)
	}
	s := &Slack{recorder: recorder{t: t}, Token: token, Channels: channels, op: spec.Operation}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/services/", s.serveWebhook)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/api"
	return s
}

// WebhookURL is the incoming-webhook URL of a channel.
func (s *Slack) WebhookURL(channel string) string {
	return strings.TrimSuffix(s.URL, "/api") + "/services/T0HOPPER/B0HOPPER/" + channel
}

// Messages lists what was posted.
func (s *Slack) Messages() []SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.messages)
}

func slackAnswer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// serveAPI answers chat.postMessage as Slack does, once the call has
// passed the checks of Slack's description (a refusal fails the test).
func (s *Slack) serveAPI(w http.ResponseWriter, r *http.Request) {
	params, ct, ok := s.readCall(w, r)
	if !ok {
		return
	}
	// The token: the description's token parameter, which Slack takes as
	// a bearer token (JSON bodies must send it so).
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = r.Header.Get("token")
	}
	if !s.described(params, ct, token) {
		s.answerError(w, "invalid_arg_name")
		return
	}
	s.post(w, params, token)
}

// readCall checks the call's path, method and content type and decodes
// its parameters (JSON or a form); it answers the call and returns false
// if any is wrong.
func (s *Slack) readCall(w http.ResponseWriter, r *http.Request) (map[string]any, string, bool) {
	if r.URL.Path != "/api/chat.postMessage" {
		s.refuse("%s %s: hopper calls only chat.postMessage", r.Method, r.URL.Path)
		slackAnswer(w, http.StatusNotFound, map[string]any{"ok": false, "error": "unknown_method"})
		return nil, "", false
	}
	if r.Method != http.MethodPost {
		s.refuse("chat.postMessage with %s", r.Method)
		slackAnswer(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_post_type"})
		return nil, "", false
	}
	ct, ctParams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if !slices.Contains(s.op.Consumes, ct) {
		s.refuse("chat.postMessage with Content-Type %q, not one of %v", ct, s.op.Consumes)
		slackAnswer(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_post_type"})
		return nil, "", false
	}
	if cs := ctParams["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") {
		s.refuse("charset %q", cs)
		slackAnswer(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_charset"})
		return nil, "", false
	}
	body, _ := io.ReadAll(r.Body)
	params := map[string]any{}
	if ct == "application/json" {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&params); err != nil {
			s.refuse("a body that is not a JSON object: %v", err)
			slackAnswer(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_json"})
			return nil, "", false
		}
	} else {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			s.refuse("a form that does not parse: %v", err)
			slackAnswer(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_form_data"})
			return nil, "", false
		}
		for k, v := range form {
			params[k] = v[0]
		}
	}
	return params, ct, true
}

// described checks the parameters (and the token's presence) against
// the description: required ones present, no others, each of its type.
func (s *Slack) described(params map[string]any, ct, token string) bool {
	before := len(s.Refusals())
	allowed := map[string]string{}
	for _, p := range s.op.Parameters {
		if p.In == "header" {
			if p.Required && token == "" {
				s.refuse("no %s", p.Name)
			}
			continue
		}
		allowed[p.Name] = p.Type
		if _, ok := params[p.Name]; p.Required && !ok {
			s.refuse("the required parameter %s is missing", p.Name)
		}
	}
	for name, v := range params {
		typ, ok := allowed[name]
		if !ok {
			s.refuse("parameter %q is not in the description", name)
			continue
		}
		switch typ {
		case "string":
			_, isString := v.(string)
			// A JSON body may carry blocks and attachments as arrays
			// (Slack's JSON mode); the form encoding as strings.
			_, isList := v.([]any)
			if !isString && !(isList && ct == "application/json" && (name == "blocks" || name == "attachments")) {
				s.refuse("parameter %s is %T, not a string", name, v)
			}
		case "boolean":
			switch b := v.(type) {
			case bool:
			case string:
				if b != "true" && b != "false" {
					s.refuse("parameter %s is %q, not a boolean", name, b)
				}
			default:
				s.refuse("parameter %s is %T, not a boolean", name, v)
			}
		}
	}
	return len(s.Refusals()) == before
}

// post checks the token, the rate limit, the channel and the text, and
// records the message.
func (s *Slack) post(w http.ResponseWriter, params map[string]any, token string) {
	if token != s.Token {
		s.answerError(w, "invalid_auth")
		return
	}
	s.mu.Lock()
	limited := s.RateLimited
	s.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", "1")
		slackAnswer(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	channel, _ := params["channel"].(string)
	if !slices.Contains(s.Channels, channel) {
		s.answerError(w, "channel_not_found")
		return
	}
	text, _ := params["text"].(string)
	if _, blocks := params["blocks"]; text == "" && !blocks {
		s.answerError(w, "no_text")
		return
	}
	if len([]rune(text)) > 40000 {
		s.answerError(w, "msg_too_long")
		return
	}
	s.mu.Lock()
	s.ts++
	ts := fmt.Sprintf("1700000000.%06d", s.ts)
	s.messages = append(s.messages, SlackMessage{Channel: channel, Params: params})
	s.mu.Unlock()
	slackAnswer(w, http.StatusOK, map[string]any{"ok": true, "channel": channel, "ts": ts,
		"message": map[string]any{"type": "message", "text": text, "ts": ts}})
}

// answerError answers one of the errors the description lists.
func (s *Slack) answerError(w http.ResponseWriter, code string) {
	if !slices.Contains(s.op.Responses["default"].Schema.Properties.Error.Enum, code) {
		s.t.Fatalf("chattest answers %q, which the description does not list", code)
	}
	slackAnswer(w, http.StatusOK, map[string]any{"ok": false, "error": code})
}

// incomingWebhookFields are the fields Slack documents for an incoming
// webhook's JSON payload.
var incomingWebhookFields = []string{"text", "blocks", "attachments", "thread_ts", "mrkdwn", "unfurl_links", "unfurl_media"}

func (s *Slack) serveWebhook(w http.ResponseWriter, r *http.Request) {
	channel := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		s.refuse("incoming webhook: %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	var params map[string]any
	if err := json.NewDecoder(r.Body).Decode(&params); err != nil {
		s.refuse("incoming webhook: a body that is not a JSON object")
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	for k := range params {
		if !slices.Contains(incomingWebhookFields, k) {
			s.refuse("incoming webhook: field %q is not one Slack takes", k)
		}
	}
	if text, _ := params["text"].(string); text == "" {
		http.Error(w, "no_text", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.messages = append(s.messages, SlackMessage{Channel: channel, Params: params, Webhook: true})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok")
}

// MatrixEvent is an event the homeserver accepted.
type MatrixEvent struct {
	RoomID, TxnID, EventID string
	Content                map[string]any
}

// Matrix is the homeserver stand-in.
type Matrix struct {
	recorder
	URL   string
	Token string
	// Joined rooms; others answer 403 M_FORBIDDEN.
	Joined []string
	// RateLimited, while set, answers 429 M_LIMIT_EXCEEDED.
	RateLimited bool

	path     *regexp.Regexp
	roomID   *regexp.Regexp
	content  map[string]*jsonschema.Schema
	errorSch *jsonschema.Schema
	events   []MatrixEvent
	txns     map[string]string // access token + txnId → event id
	puts     int
}

// NewMatrix starts a homeserver stand-in for the test.
func NewMatrix(t testing.TB, token string, joined ...string) *Matrix {
	t.Helper()
	var spec struct {
		BasePath  string                     `json:"basePath"`
		Path      string                     `json:"path"`
		Operation json.RawMessage            `json:"operation"`
		Content   map[string]json.RawMessage `json:"content"`
		Error     json.RawMessage            `json:"error"`
	}
	if err := json.Unmarshal(matrixSpec, &spec); err != nil {
		t.Fatalf("reading Matrix's description: %v", err)
	}
	var op struct {
		Parameters []struct {
			Name   string `json:"name"`
			Schema struct {
				Pattern string `json:"pattern"`
			} `json:"schema"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(spec.Operation, &op); err != nil {
		t.Fatal(err)
	}
	m := &Matrix{recorder: recorder{t: t}, Token: token, Joined: joined, content: map[string]*jsonschema.Schema{}, txns: map[string]string{}}
	for _, p := range op.Parameters {
		if p.Name == "roomId" {
			m.roomID = regexp.MustCompile(p.Schema.Pattern)
		}
	}
	// The path template, its parameters as one segment each.
	var pattern strings.Builder
	for i, seg := range strings.Split(spec.BasePath+spec.Path, "/") {
		if i > 0 {
			pattern.WriteString("/")
		}
		if strings.HasPrefix(seg, "{") {
			pattern.WriteString(`([^/]+)`)
		} else {
			pattern.WriteString(regexp.QuoteMeta(seg))
		}
	}
	m.path = regexp.MustCompile("^" + pattern.String() + "$")
	compile := func(name string, raw json.RawMessage) *jsonschema.Schema {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(name, doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(name)
		if err != nil {
			t.Fatalf("compiling %s: %v", name, err)
		}
		return sch
	}
	for msgtype, raw := range spec.Content {
		m.content[msgtype] = compile("matrix-content-"+msgtype+".json", raw)
	}
	m.errorSch = compile("matrix-error.json", spec.Error)
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.URL = srv.URL
	return m
}

// Events lists the events posted.
func (m *Matrix) Events() []MatrixEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events)
}

// Puts counts the send requests that reached the room (repeats included).
func (m *Matrix) Puts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts
}

func (m *Matrix) fail(w http.ResponseWriter, status int, errcode, msg string, extra map[string]any) {
	body := map[string]any{"errcode": errcode, "error": msg}
	for k, v := range extra {
		body[k] = v
	}
	if err := m.errorSch.Validate(body); err != nil {
		m.t.Fatalf("chattest's own error body breaks the description: %v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (m *Matrix) serve(w http.ResponseWriter, r *http.Request) {
	parts := m.path.FindStringSubmatch(r.URL.EscapedPath())
	if parts == nil || r.Method != http.MethodPut {
		m.refuse("%s %s is not the send operation", r.Method, r.URL.EscapedPath())
		m.fail(w, http.StatusNotFound, "M_UNRECOGNIZED", "Unrecognized request", nil)
		return
	}
	before := len(m.Refusals())
	roomID, _ := url.PathUnescape(parts[1])
	eventType, _ := url.PathUnescape(parts[2])
	txnID, _ := url.PathUnescape(parts[3])
	if !m.roomID.MatchString(roomID) {
		m.refuse("room id %q does not match %s", roomID, m.roomID)
	}
	if eventType != "m.room.message" {
		m.refuse("event type %q", eventType)
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		m.refuse("no bearer access token")
		m.fail(w, http.StatusUnauthorized, "M_MISSING_TOKEN", "Missing access token", nil)
		return
	}
	if token != m.Token {
		m.fail(w, http.StatusUnauthorized, "M_UNKNOWN_TOKEN", "Unknown access token", nil)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		m.refuse("Content-Type %q", r.Header.Get("Content-Type"))
	}
	body, _ := io.ReadAll(r.Body)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	content, isObject := doc.(map[string]any)
	if err != nil || !isObject {
		m.refuse("a body that is not a JSON object")
		m.fail(w, http.StatusBadRequest, "M_NOT_JSON", "Content not JSON.", nil)
		return
	}
	msgtype, _ := content["msgtype"].(string)
	sch := m.content[msgtype]
	if sch == nil {
		m.refuse("msgtype %q is not one hopper may send", msgtype)
		m.fail(w, http.StatusBadRequest, "M_BAD_JSON", "bad msgtype", nil)
		return
	}
	if err := sch.Validate(doc); err != nil {
		m.refuse("content breaks the m.room.message %s schema: %v", msgtype, err)
		m.fail(w, http.StatusBadRequest, "M_BAD_JSON", err.Error(), nil)
		return
	}
	// The schema's prose: format and formatted_body go together, and only
	// org.matrix.custom.html is defined.
	_, hasFormat := content["format"]
	_, hasFormatted := content["formatted_body"]
	if hasFormat != hasFormatted {
		m.refuse("format and formatted_body must be sent together")
	}
	if f, _ := content["format"].(string); hasFormat && f != "org.matrix.custom.html" {
		m.refuse("format %q is not org.matrix.custom.html", f)
	}
	if len(m.Refusals()) > before {
		m.fail(w, http.StatusBadRequest, "M_BAD_JSON", "not allowed", nil)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	if m.RateLimited {
		m.fail(w, http.StatusTooManyRequests, "M_LIMIT_EXCEEDED", "Too many requests", map[string]any{"retry_after_ms": 1000})
		return
	}
	if !slices.Contains(m.Joined, roomID) {
		m.fail(w, http.StatusForbidden, "M_FORBIDDEN", "User is not in the room", nil)
		return
	}
	// Transaction identifiers: a repeat of (access token, txnId) is
	// answered with the first event's id, and posts nothing.
	key := token + "\x00" + txnID
	id, seen := m.txns[key]
	if !seen {
		id = "$hopper" + strconv.Itoa(len(m.events)+1) + ":localhost"
		m.txns[key] = id
		m.events = append(m.events, MatrixEvent{RoomID: roomID, TxnID: txnID, EventID: id, Content: content})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"event_id": id})
}
