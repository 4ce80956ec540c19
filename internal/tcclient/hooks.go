package tcclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// Hook is a hook definition (the Hooks API's hook-definition). The parts
// the client does not interpret stay JSON.
type Hook struct {
	HookGroupID   string          `json:"hookGroupId,omitempty"`
	HookID        string          `json:"hookId,omitempty"`
	Metadata      json.RawMessage `json:"metadata"`
	Bindings      json.RawMessage `json:"bindings,omitempty"`
	Schedule      []string        `json:"schedule,omitempty"`
	Task          json.RawMessage `json:"task"`
	TriggerSchema json.RawMessage `json:"triggerSchema,omitempty"`
}

// HookStatus is getHookStatus's reply.
type HookStatus struct {
	LastFire          map[string]any `json:"lastFire"`
	NextScheduledDate string         `json:"nextScheduledDate,omitempty"`
}

// HookFire is one entry of listLastFires.
type HookFire struct {
	HookGroupID    string `json:"hookGroupId"`
	HookID         string `json:"hookId"`
	FiredBy        string `json:"firedBy"`
	TaskID         string `json:"taskId"`
	TaskCreateTime string `json:"taskCreateTime"`
	Result         string `json:"result"`
	Error          string `json:"error"`
	TaskState      string `json:"taskState"`
}

// ListLastFiresResponse is one page of listLastFires.
type ListLastFiresResponse struct {
	LastFires         []HookFire `json:"lastFires"`
	ContinuationToken string     `json:"continuationToken,omitempty"`
}

// TriggerHookResponse is triggerHook's reply: the created task, or no
// taskId when the template declined to create one.
type TriggerHookResponse struct {
	TaskID string `json:"taskId,omitempty"`
}

// HooksBaseURL returns the Hooks API base URL without a trailing slash.
func (c *Client) HooksBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/hooks/v1"
}

func (c *Client) doHooks(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := c.doAt(ctx, c.HooksBaseURL(), method, path, query, in, out)
	return err
}

func hookPath(hookGroupID, hookID string) string {
	return "/hooks/" + EscapePathParam(hookGroupID) + "/" + EscapePathParam(hookID)
}

// CreateHook creates a hook (an identical repeat succeeds).
func (c *Client) CreateHook(ctx context.Context, hookGroupID, hookID string, def *Hook) (*Hook, error) {
	var out Hook
	return &out, c.doHooks(ctx, http.MethodPut, hookPath(hookGroupID, hookID), nil, def, &out)
}

// UpdateHook replaces a hook's definition.
func (c *Client) UpdateHook(ctx context.Context, hookGroupID, hookID string, def *Hook) (*Hook, error) {
	var out Hook
	return &out, c.doHooks(ctx, http.MethodPost, hookPath(hookGroupID, hookID), nil, def, &out)
}

// GetHook returns a hook's definition.
func (c *Client) GetHook(ctx context.Context, hookGroupID, hookID string) (*Hook, error) {
	var out Hook
	return &out, c.doHooks(ctx, http.MethodGet, hookPath(hookGroupID, hookID), nil, nil, &out)
}

// RemoveHook deletes a hook and its record of fires.
func (c *Client) RemoveHook(ctx context.Context, hookGroupID, hookID string) error {
	return c.doHooks(ctx, http.MethodDelete, hookPath(hookGroupID, hookID), nil, nil, nil)
}

// ListHookGroups lists the groups that hold hooks.
func (c *Client) ListHookGroups(ctx context.Context) ([]string, error) {
	var out struct {
		Groups []string `json:"groups"`
	}
	return out.Groups, c.doHooks(ctx, http.MethodGet, "/hooks", nil, nil, &out)
}

// ListHooks lists a group's hooks.
func (c *Client) ListHooks(ctx context.Context, hookGroupID string) ([]Hook, error) {
	var out struct {
		Hooks []Hook `json:"hooks"`
	}
	return out.Hooks, c.doHooks(ctx, http.MethodGet, "/hooks/"+EscapePathParam(hookGroupID), nil, nil, &out)
}

// GetHookStatus returns a hook's last fire and next due time.
func (c *Client) GetHookStatus(ctx context.Context, hookGroupID, hookID string) (*HookStatus, error) {
	var out HookStatus
	return &out, c.doHooks(ctx, http.MethodGet, hookPath(hookGroupID, hookID)+"/status", nil, nil, &out)
}

// TriggerHook fires a hook with a payload (nil sends {}).
func (c *Client) TriggerHook(ctx context.Context, hookGroupID, hookID string, payload any) (*TriggerHookResponse, error) {
	if payload == nil {
		payload = map[string]any{}
	}
	var out TriggerHookResponse
	return &out, c.doHooks(ctx, http.MethodPost, hookPath(hookGroupID, hookID)+"/trigger", nil, payload, &out)
}

// ListLastFires returns one page of a hook's fires, newest first.
func (c *Client) ListLastFires(ctx context.Context, hookGroupID, hookID string, opts ListOptions) (*ListLastFiresResponse, error) {
	var out ListLastFiresResponse
	return &out, c.doHooks(ctx, http.MethodGet, hookPath(hookGroupID, hookID)+"/last-fires", listQuery(opts), nil, &out)
}

// AllLastFires returns every recorded fire of a hook, newest first.
func (c *Client) AllLastFires(ctx context.Context, hookGroupID, hookID string) ([]HookFire, error) {
	return allPages("fires of hook "+hookGroupID+"/"+hookID, func(opts ListOptions) ([]HookFire, string, error) {
		page, err := c.ListLastFires(ctx, hookGroupID, hookID, opts)
		if err != nil {
			return nil, "", err
		}
		return page.LastFires, page.ContinuationToken, nil
	})
}

// TriggerToken is the secret token of a hook's webhook URL
// (…/hooks/<hookGroupId>/<hookId>/trigger/<token>).
type TriggerToken struct {
	Token string `json:"token"`
}

// GetTriggerToken returns a hook's webhook token; reset replaces it first
// (resetTriggerToken), so URLs handed out before stop working.
func (c *Client) GetTriggerToken(ctx context.Context, hookGroupID, hookID string, reset bool) (*TriggerToken, error) {
	method := http.MethodGet
	if reset {
		method = http.MethodPost
	}
	var out TriggerToken
	return &out, c.doHooks(ctx, method, hookPath(hookGroupID, hookID)+"/token", nil, nil, &out)
}
