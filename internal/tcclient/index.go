package tcclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// IndexedTask is an entry of the Index service: the task found at an index
// path.
type IndexedTask struct {
	Namespace string          `json:"namespace"`
	TaskID    string          `json:"taskId"`
	Rank      float64         `json:"rank"`
	Data      json.RawMessage `json:"data"`
	Expires   Time            `json:"expires"`
}

// IndexNamespace is a namespace of the Index service.
type IndexNamespace struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Expires   Time   `json:"expires"`
}

// ListIndexedTasksResponse is one page of listTasks.
type ListIndexedTasksResponse struct {
	Tasks             []IndexedTask `json:"tasks"`
	ContinuationToken string        `json:"continuationToken,omitempty"`
}

// ListIndexNamespacesResponse is one page of listNamespaces.
type ListIndexNamespacesResponse struct {
	Namespaces        []IndexNamespace `json:"namespaces"`
	ContinuationToken string           `json:"continuationToken,omitempty"`
}

// InsertIndexedTaskRequest is the body of insertTask.
type InsertIndexedTaskRequest struct {
	TaskID  string          `json:"taskId"`
	Rank    float64         `json:"rank"`
	Data    json.RawMessage `json:"data"`
	Expires Time            `json:"expires"`
}

// IndexBaseURL returns the Index API base URL without a trailing slash.
func (c *Client) IndexBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/index/v1"
}

func (c *Client) doIndex(ctx context.Context, method, path string, opts *ListOptions, in, out any) error {
	var q = listQuery(ListOptions{})
	if opts != nil {
		q = listQuery(*opts)
	}
	_, err := c.doAt(ctx, c.IndexBaseURL(), method, path, q, in, out)
	return err
}

// FindIndexedTask returns the entry at an index path (findTask).
func (c *Client) FindIndexedTask(ctx context.Context, path string) (*IndexedTask, error) {
	var out IndexedTask
	if err := c.doIndex(ctx, http.MethodGet, "/task/"+EscapePathParam(path), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("finding index path %s: %w", path, err)
	}
	return &out, nil
}

// ListIndexedTasks returns one page of the entries directly in namespace
// ("" for the root).
func (c *Client) ListIndexedTasks(ctx context.Context, namespace string, opts ListOptions) (*ListIndexedTasksResponse, error) {
	var out ListIndexedTasksResponse
	if err := c.doIndex(ctx, http.MethodGet, "/tasks/"+EscapePathParam(namespace), &opts, nil, &out); err != nil {
		return nil, fmt.Errorf("listing the entries of namespace %q: %w", namespace, err)
	}
	return &out, nil
}

// ListIndexNamespaces returns one page of the namespaces directly under
// namespace ("" for the root).
func (c *Client) ListIndexNamespaces(ctx context.Context, namespace string, opts ListOptions) (*ListIndexNamespacesResponse, error) {
	var out ListIndexNamespacesResponse
	if err := c.doIndex(ctx, http.MethodGet, "/namespaces/"+EscapePathParam(namespace), &opts, nil, &out); err != nil {
		return nil, fmt.Errorf("listing the namespaces under %q: %w", namespace, err)
	}
	return &out, nil
}

// InsertIndexedTask stores an entry at an index path (insertTask) and
// returns the entry kept there (the existing one if it has a higher rank).
func (c *Client) InsertIndexedTask(ctx context.Context, path string, req *InsertIndexedTaskRequest) (*IndexedTask, error) {
	body := *req
	if len(body.Data) == 0 {
		body.Data = json.RawMessage(`{}`)
	}
	var out IndexedTask
	if err := c.doIndex(ctx, http.MethodPut, "/task/"+EscapePathParam(path), nil, &body, &out); err != nil {
		return nil, fmt.Errorf("indexing task %s at %s: %w", req.TaskID, path, err)
	}
	return &out, nil
}

// DeleteIndexedTask removes the entry at an index path (deleteTask).
func (c *Client) DeleteIndexedTask(ctx context.Context, path string) error {
	if err := c.doIndex(ctx, http.MethodDelete, "/task/"+EscapePathParam(path), nil, nil, nil); err != nil {
		return fmt.Errorf("deleting index path %s: %w", path, err)
	}
	return nil
}

// AllIndexNamespaces lists every namespace directly in namespace,
// following continuation tokens.
func (c *Client) AllIndexNamespaces(ctx context.Context, namespace string) ([]IndexNamespace, error) {
	return allPages(fmt.Sprintf("the namespaces of %q", namespace), func(opts ListOptions) ([]IndexNamespace, string, error) {
		page, err := c.ListIndexNamespaces(ctx, namespace, opts)
		if err != nil {
			return nil, "", err
		}
		return page.Namespaces, page.ContinuationToken, nil
	})
}

// AllIndexedTasks lists every entry directly in namespace, following
// continuation tokens.
func (c *Client) AllIndexedTasks(ctx context.Context, namespace string) ([]IndexedTask, error) {
	return allPages(fmt.Sprintf("the entries of %q", namespace), func(opts ListOptions) ([]IndexedTask, string, error) {
		page, err := c.ListIndexedTasks(ctx, namespace, opts)
		if err != nil {
			return nil, "", err
		}
		return page.Tasks, page.ContinuationToken, nil
	})
}
