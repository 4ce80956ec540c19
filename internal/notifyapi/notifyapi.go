// Package notifyapi serves hopper's Notify service at
// <rootUrl>/api/notify/v1: every method of Taskcluster's Notify API v1
// (email, pulse, matrix, slack, the denylist, ping and heartbeats), and
// hopper's own listing of a task's notifications for the console.
//
// A request to send is stored in the outbox before it is answered, and
// sent by the sender duty (notifysend.Sender): 200 says it will be
// sent, 204 that the same request came within notify.DuplicateWindow and
// will not be sent again, 400 DenylistedAddress that its address is on the
// denylist. What became of it afterwards is in the outbox, not the answer.
package notifyapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the Notify API lives below the root URL.
const BasePath = "/api/notify/v1"

// NotificationHeader carries the id of a stored notification in the
// answer to email, pulse, matrix, slack and webhook: GET
// notification/<id> tells what became of it.
const NotificationHeader = "X-Hopper-Notification"

// Deps are what the Notify API needs.
type Deps struct {
	Store   store.NotifyStore
	Version string
	Started time.Time
}

type handlers struct {
	Deps
}

// Scope-expression templates, as Taskcluster declares them.
const (
	scopesEmail    = `"notify:email:<address>"`
	scopesPulse    = `"notify:pulse:<routingKey>"`
	scopesMatrix   = `"notify:matrix-room:<roomId>"`
	scopesSlack    = `"notify:slack-channel:<channelId>"`
	scopesDenylist = `"notify:manage-denylist"`
	scopesWebhook  = `"notify:webhook:<name>"`
)

// Routes returns the Notify API routes.
func Routes(d Deps) []api.Route {
	if d.Started.IsZero() {
		d.Started = time.Now()
	}
	if d.Version == "" {
		d.Version = "dev"
	}
	h := &handlers{Deps: d}
	p := func(path string) []string { return []string{BasePath + path} }
	return append(api.ServiceHealthRoutes(BasePath, h.Started, h.Version), []api.Route{
		{Name: "email", Method: http.MethodPost, Paths: p("/email"), Input: "notify-email-request", Scopes: scopesEmail, Handle: h.email},
		{Name: "pulse", Method: http.MethodPost, Paths: p("/pulse"), Input: "notify-pulse-request", Scopes: scopesPulse, Handle: h.pulse},
		{Name: "matrix", Method: http.MethodPost, Paths: p("/matrix"), Input: "notify-matrix-request", Scopes: scopesMatrix, Handle: h.matrix},
		{Name: "slack", Method: http.MethodPost, Paths: p("/slack"), Input: "notify-slack-request", Scopes: scopesSlack, Handle: h.slack},
		{Name: "addDenylistAddress", Method: http.MethodPost, Paths: p("/denylist/add"), Input: "notify-address",
			Scopes: scopesDenylist, EarlyScopes: true, Handle: h.addDenylist},
		{Name: "deleteDenylistAddress", Method: http.MethodDelete, Paths: p("/denylist/delete"), Input: "notify-address",
			Scopes: scopesDenylist, EarlyScopes: true, Handle: h.deleteDenylist},
		{Name: "listDenylist", Method: http.MethodGet, Paths: p("/denylist/list"), Query: []string{"continuationToken", "limit"},
			Scopes: scopesDenylist, EarlyScopes: true, Handle: h.listDenylist},
		// hopper's own: a signed webhook to a configured endpoint, what
		// became of a notification, and what a task's routes produced.
		{Name: "webhook", Method: http.MethodPost, Paths: p("/webhook"), Input: "notify-webhook-request", Scopes: scopesWebhook, Handle: h.webhook},
		{Name: "notification", Method: http.MethodGet, Paths: p("/notification/{id}"), Handle: h.notification},
		{Name: "listTaskNotifications", Method: http.MethodGet, Paths: p("/task/{taskId}/notifications"),
			Query: []string{"continuationToken", "limit"}, Handle: h.listTask},
	}...)
}

// maxWebhookMessage bounds the message of a webhook request.
const maxWebhookMessage = 64 * 1024

// statusOnly is a reply with a status and its name as text, as
// Taskcluster's res.sendStatus answers (204: no body).
func statusOnly(status int) *api.Response {
	if status == http.StatusNoContent {
		return &api.Response{Status: status}
	}
	return &api.Response{Status: status, Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		RawBody: []byte(http.StatusText(status))}
}

func denylisted(what, address string) error {
	return &api.Error{Code: api.CodeDenylistedAddress, Message: what + " " + address + " is denylisted"}
}

// enqueue checks the denylist, then stores the message.
func (h *handlers) enqueue(c *api.Call, m *notify.Message, what string) (any, error) {
	denied, err := h.Store.IsDenylisted(c.Context(), m.Channel(), m.Target())
	if err != nil {
		return nil, err
	}
	if denied {
		return nil, denylisted(what, m.Target())
	}
	id, duplicate, err := h.Store.EnqueueNotification(c.Context(), m, c.Now)
	if err != nil {
		return nil, err
	}
	if duplicate {
		return statusOnly(http.StatusNoContent), nil
	}
	res := statusOnly(http.StatusOK)
	res.Header.Set(NotificationHeader, id)
	return res, nil
}

func inputError(err error) error {
	return &api.Error{Code: api.CodeInputError, Message: err.Error()}
}

func (h *handlers) email(c *api.Call) (any, error) {
	var e notify.Email
	if err := c.Decode(&e); err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"address": e.Address}); err != nil {
		return nil, err
	}
	if err := notify.ValidateEmail(e.Address); err != nil {
		return nil, inputError(err)
	}
	if e.ReplyTo != "" {
		if err := notify.ValidateEmail(e.ReplyTo); err != nil {
			return nil, inputError(err)
		}
	}
	return h.enqueue(c, &notify.Message{Email: &e}, "Email")
}

func (h *handlers) pulse(c *api.Call) (any, error) {
	var p notify.Pulse
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"routingKey": p.RoutingKey}); err != nil {
		return nil, err
	}
	if err := notify.ValidateTarget(notify.ChannelPulse, p.RoutingKey); err != nil {
		return nil, inputError(err)
	}
	return h.enqueue(c, &notify.Message{Pulse: &p}, "Pulse routing key pattern")
}

func (h *handlers) matrix(c *api.Call) (any, error) {
	var m notify.Matrix
	if err := c.Decode(&m); err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"roomId": m.RoomID}); err != nil {
		return nil, err
	}
	if err := notify.ValidateTarget(notify.ChannelMatrix, m.RoomID); err != nil {
		return nil, inputError(err)
	}
	return h.enqueue(c, &notify.Message{Matrix: &m}, "Matrix room")
}

func (h *handlers) slack(c *api.Call) (any, error) {
	var s notify.Slack
	if err := c.Decode(&s); err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"channelId": s.ChannelID}); err != nil {
		return nil, err
	}
	if err := notify.ValidateTarget(notify.ChannelSlack, s.ChannelID); err != nil {
		return nil, inputError(err)
	}
	return h.enqueue(c, &notify.Message{Slack: &s}, "Slack channel")
}

func (h *handlers) webhook(c *api.Call) (any, error) {
	var in struct {
		Name    string          `json:"name"`
		Message json.RawMessage `json:"message"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"name": in.Name}); err != nil {
		return nil, err
	}
	if err := notify.ValidateTarget(notify.ChannelWebhook, in.Name); err != nil {
		return nil, inputError(err)
	}
	if len(in.Message) > maxWebhookMessage {
		return nil, inputError(fmt.Errorf("the message is %d bytes, more than %d", len(in.Message), maxWebhookMessage))
	}
	body, err := json.Marshal(struct {
		Message json.RawMessage `json:"message"`
	}{in.Message})
	if err != nil {
		return nil, err
	}
	return h.enqueue(c, &notify.Message{Webhook: &notify.Webhook{Name: in.Name, Body: body}}, "Webhook")
}

// notification tells what became of one notification. Its id is a
// random UUID known to whoever stored it; the answer carries no message.
func (h *handlers) notification(c *api.Call) (any, error) {
	n, err := h.Store.GetNotification(c.Context(), c.Params["id"])
	if errors.Is(err, store.ErrNotFound) {
		return nil, &api.Error{Code: api.CodeResourceNotFound, Message: "no notification " + c.Params["id"]}
	}
	if err != nil {
		return nil, err
	}
	return describe(*n), nil
}

func (h *handlers) addDenylist(c *api.Call) (any, error) {
	var a store.DenylistAddress
	if err := c.Decode(&a); err != nil {
		return nil, err
	}
	if err := h.Store.AddDenylistAddress(c.Context(), a.NotificationType, a.NotificationAddress); err != nil {
		return nil, err
	}
	return statusOnly(http.StatusOK), nil
}

func (h *handlers) deleteDenylist(c *api.Call) (any, error) {
	var a store.DenylistAddress
	if err := c.Decode(&a); err != nil {
		return nil, err
	}
	if err := h.Store.DeleteDenylistAddress(c.Context(), a.NotificationType, a.NotificationAddress); err != nil {
		return nil, err
	}
	return statusOnly(http.StatusOK), nil
}

func (h *handlers) listDenylist(c *api.Call) (any, error) {
	list, next, err := h.Store.ListDenylist(c.Context(), c.Page())
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []store.DenylistAddress{}
	}
	return struct {
		Addresses         []store.DenylistAddress `json:"addresses"`
		ContinuationToken string                  `json:"continuationToken,omitempty"`
	}{list, next}, nil
}

// TaskNotification is one notification in listTaskNotifications.
type TaskNotification struct {
	ID          string `json:"id"`
	Channel     string `json:"channel"`
	Target      string `json:"target"`
	Route       string `json:"route"`
	Event       string `json:"event"`
	RunID       *int   `json:"runId,omitempty"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	Error       string `json:"error,omitempty"`
	Created     string `json:"created"`
	Updated     string `json:"updated"`
	NextAttempt string `json:"nextAttempt,omitempty"`
}

func describe(n store.Notification) TaskNotification {
	tn := TaskNotification{ID: n.ID, Channel: n.Channel, Target: n.Target, Route: n.Route, Event: n.Event,
		State: n.State, Attempts: n.Attempts, Error: n.Error,
		Created: n.Created.UTC().Format(time.RFC3339Nano), Updated: n.Updated.UTC().Format(time.RFC3339Nano)}
	if n.TaskID != "" && n.RunID >= 0 {
		run := n.RunID
		tn.RunID = &run
	}
	if n.State == notify.StatePending && n.NextAttempt.Unix() > 0 {
		tn.NextAttempt = n.NextAttempt.UTC().Format(time.RFC3339Nano)
	}
	return tn
}

// listTask lists a task's notifications and what became of them. Like
// the task's status, it needs no scope: a notification's target is in the
// task's routes already.
func (h *handlers) listTask(c *api.Call) (any, error) {
	list, next, err := h.Store.ListTaskNotifications(c.Context(), c.Params["taskId"], c.Page())
	if errors.Is(err, store.ErrBadContinuationToken) {
		return nil, inputError(err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]TaskNotification, 0, len(list))
	for _, n := range list {
		out = append(out, describe(n))
	}
	return struct {
		TaskID            string             `json:"taskId"`
		Notifications     []TaskNotification `json:"notifications"`
		ContinuationToken string             `json:"continuationToken,omitempty"`
	}{c.Params["taskId"], out, next}, nil
}
