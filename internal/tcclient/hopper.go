package tcclient

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HopperBaseURL returns the base URL of hopper's own API (operator views
// Taskcluster has no methods for) without a trailing slash.
func (c *Client) HopperBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/hopper/v1"
}

// TaskFilter narrows ListTasks; every field is optional.
type TaskFilter struct {
	State       string
	TaskQueueID string
	TaskGroupID string
	// Name is found anywhere in the tasks' names, ignoring case.
	Name string
	// CreatedFrom (included) and CreatedTo (excluded) bound the tasks'
	// created times.
	CreatedFrom, CreatedTo time.Time
}

// ListTasksResponse is one page of ListTasks, newest task first.
type ListTasksResponse struct {
	Tasks             []TaskGroupMember `json:"tasks"`
	ContinuationToken string            `json:"continuationToken,omitempty"`
}

// ListTasks lists tasks of every queue matching f, newest first (hopper's
// GET /api/hopper/v1/tasks).
func (c *Client) ListTasks(ctx context.Context, f TaskFilter, opts ListOptions) (*ListTasksResponse, error) {
	q := listQuery(opts)
	for k, v := range map[string]string{"state": f.State, "taskQueueId": f.TaskQueueID, "taskGroupId": f.TaskGroupID, "name": f.Name} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.CreatedFrom.IsZero() {
		q.Set("createdFrom", f.CreatedFrom.UTC().Format(time.RFC3339Nano))
	}
	if !f.CreatedTo.IsZero() {
		q.Set("createdTo", f.CreatedTo.UTC().Format(time.RFC3339Nano))
	}
	var out ListTasksResponse
	if _, err := c.doAt(ctx, c.HopperBaseURL(), http.MethodGet, "/tasks", q, nil, &out); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	return &out, nil
}
