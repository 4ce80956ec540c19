package tcclient

import (
	"context"
	"net/http"
	"strings"
)

// NotifyBaseURL returns the Notify API base URL without a trailing slash.
func (c *Client) NotifyBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/notify/v1"
}

// notificationHeader carries the id of a notification the server stored.
const notificationHeader = "X-Hopper-Notification"

// SendNotification calls one of the Notify API's send methods (email,
// pulse, matrix, slack, or hopper's webhook) with the request body, and
// returns the id the notification was stored under; duplicate says the
// server had the same request lately and will not send it again.
func (c *Client) SendNotification(ctx context.Context, method string, body any) (id string, duplicate bool, err error) {
	rep, err := c.doAt(ctx, c.NotifyBaseURL(), http.MethodPost, "/"+method, nil, body, nil)
	if err != nil {
		return "", false, err
	}
	return rep.header.Get(notificationHeader), rep.status == http.StatusNoContent, nil
}

// Notification is what became of one notification (hopper's own
// notification/<id> and task/<taskId>/notifications).
type Notification struct {
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

// Notification reads one notification's state.
func (c *Client) Notification(ctx context.Context, id string) (*Notification, error) {
	var out Notification
	_, err := c.doAt(ctx, c.NotifyBaseURL(), http.MethodGet, "/notification/"+EscapePathParam(id), nil, nil, &out)
	return &out, err
}

// TaskNotifications lists the notifications a task's routes produced.
func (c *Client) TaskNotifications(ctx context.Context, taskID string) ([]Notification, error) {
	var out struct {
		Notifications []Notification `json:"notifications"`
	}
	_, err := c.doAt(ctx, c.NotifyBaseURL(), http.MethodGet, "/task/"+EscapePathParam(taskID)+"/notifications", nil, nil, &out)
	return out.Notifications, err
}
