package tcclient

import (
	"context"
	"fmt"
	"net/http"
)

// maxPages bounds the paging helpers below: a server that keeps handing out
// continuation tokens (a bug, or a token that never advances) must not keep
// a client looping forever. 1000 pages of up to 1000 items is far beyond
// any real task group or artifact list.
const maxPages = 1000

// allPages collects the items of every page of a list, fetching each with
// the previous page's continuation token, and refuses a list of more than
// maxPages pages. what names the list in that error.
func allPages[T any](what string, fetch func(ListOptions) ([]T, string, error)) ([]T, error) {
	var all []T
	opts := ListOptions{}
	for range maxPages {
		items, next, err := fetch(opts)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		opts.ContinuationToken = next
	}
	return nil, fmt.Errorf("listing %s: more than %d pages", what, maxPages)
}

// CreateTaskDocument defines a task from an arbitrary JSON-encodable
// document (usually a map decoded from a user's YAML or JSON file). Unlike
// CreateTask it sends the document verbatim, so fields the typed
// TaskDefinition does not model (or misspelled ones) reach the queue, which
// then validates them and explains what is wrong.
func (c *Client) CreateTaskDocument(ctx context.Context, taskID string, doc any) (*TaskStatus, error) {
	var out StatusResponse
	if err := c.Do(ctx, http.MethodPut, taskPath(taskID), nil, doc, &out); err != nil {
		return nil, fmt.Errorf("creating task %s: %w", taskID, err)
	}
	return &out.Status, nil
}

// ListLatestArtifacts returns one page of the artifacts of the task's latest
// run.
func (c *Client) ListLatestArtifacts(ctx context.Context, taskID string, opts ListOptions) (*ListArtifactsResponse, error) {
	var out ListArtifactsResponse
	if err := c.Do(ctx, http.MethodGet, taskPath(taskID)+"/artifacts", listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing artifacts of task %s: %w", taskID, err)
	}
	return &out, nil
}

// AllArtifacts lists every artifact of a run, following continuation
// tokens. A negative runID means the latest run.
func (c *Client) AllArtifacts(ctx context.Context, taskID string, runID int) ([]Artifact, error) {
	return allPages("artifacts of task "+taskID, func(opts ListOptions) ([]Artifact, string, error) {
		var (
			page *ListArtifactsResponse
			err  error
		)
		if runID < 0 {
			page, err = c.ListLatestArtifacts(ctx, taskID, opts)
		} else {
			page, err = c.ListArtifacts(ctx, taskID, runID, opts)
		}
		if err != nil {
			return nil, "", err
		}
		return page.Artifacts, page.ContinuationToken, nil
	})
}

// TaskGroup is the getTaskGroup reply: a group's identity without its
// members.
type TaskGroup struct {
	TaskGroupID string `json:"taskGroupId"`
	SchedulerID string `json:"schedulerId"`
	Expires     Time   `json:"expires"`
	Sealed      Time   `json:"sealed,omitzero"`
}

// GetTaskGroup returns a task group's record.
func (c *Client) GetTaskGroup(ctx context.Context, taskGroupID string) (*TaskGroup, error) {
	var out TaskGroup
	if err := c.Do(ctx, http.MethodGet, "/task-group/"+EscapePathParam(taskGroupID), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting task group %s: %w", taskGroupID, err)
	}
	return &out, nil
}

// ListAllTaskGroup lists every member of a task group, following
// continuation tokens; the reply's group fields come from the first page
// and its ContinuationToken is empty.
func (c *Client) ListAllTaskGroup(ctx context.Context, taskGroupID string) (*ListTaskGroupResponse, error) {
	var all *ListTaskGroupResponse
	opts := ListOptions{}
	for range maxPages {
		page, err := c.ListTaskGroup(ctx, taskGroupID, opts)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = page
		} else {
			all.Tasks = append(all.Tasks, page.Tasks...)
		}
		if page.ContinuationToken == "" {
			all.ContinuationToken = ""
			return all, nil
		}
		opts.ContinuationToken = page.ContinuationToken
	}
	return nil, fmt.Errorf("listing task group %s: more than %d pages", taskGroupID, maxPages)
}
