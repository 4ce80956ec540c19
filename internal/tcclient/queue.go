package tcclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

func taskPath(taskID string) string { return "/task/" + EscapePathParam(taskID) }

func runPath(taskID string, runID int) string {
	return taskPath(taskID) + "/runs/" + strconv.Itoa(runID)
}

func listQuery(opts ListOptions) url.Values {
	q := url.Values{}
	if opts.ContinuationToken != "" {
		q.Set("continuationToken", opts.ContinuationToken)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	return q
}

// CreateTask defines a task (PUT /task/<taskId>) and returns its status.
func (c *Client) CreateTask(ctx context.Context, taskID string, def *TaskDefinition) (*TaskStatus, error) {
	var out StatusResponse
	if err := c.Do(ctx, http.MethodPut, taskPath(taskID), nil, def, &out); err != nil {
		return nil, fmt.Errorf("creating task %s: %w", taskID, err)
	}
	return &out.Status, nil
}

// Task returns a task definition.
func (c *Client) Task(ctx context.Context, taskID string) (*TaskDefinition, error) {
	var out TaskDefinition
	if err := c.Do(ctx, http.MethodGet, taskPath(taskID), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting task %s: %w", taskID, err)
	}
	return &out, nil
}

// Status returns a task's status.
func (c *Client) Status(ctx context.Context, taskID string) (*TaskStatus, error) {
	var out StatusResponse
	if err := c.Do(ctx, http.MethodGet, taskPath(taskID)+"/status", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting status of task %s: %w", taskID, err)
	}
	return &out.Status, nil
}

// ClaimWork long-polls for up to req.Tasks pending tasks of taskQueueId.
func (c *Client) ClaimWork(ctx context.Context, taskQueueID string, req *ClaimWorkRequest) (*ClaimWorkResponse, error) {
	var out ClaimWorkResponse
	if err := c.Do(ctx, http.MethodPost, "/claim-work/"+EscapePathParam(taskQueueID), nil, req, &out); err != nil {
		return nil, fmt.Errorf("claiming work from %s: %w", taskQueueID, err)
	}
	return &out, nil
}

// ClaimTask claims one specific pending run (used for superseding).
func (c *Client) ClaimTask(ctx context.Context, taskID string, runID int, req *ClaimTaskRequest) (*TaskClaim, error) {
	var out TaskClaim
	if err := c.Do(ctx, http.MethodPost, runPath(taskID, runID)+"/claim", nil, req, &out); err != nil {
		return nil, fmt.Errorf("claiming task %s run %d: %w", taskID, runID, err)
	}
	return &out, nil
}

// ReclaimTask extends the claim on a run and returns fresh credentials.
func (c *Client) ReclaimTask(ctx context.Context, taskID string, runID int) (*TaskReclaim, error) {
	var out TaskReclaim
	if err := c.Do(ctx, http.MethodPost, runPath(taskID, runID)+"/reclaim", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("reclaiming task %s run %d: %w", taskID, runID, err)
	}
	return &out, nil
}

// ReportCompleted resolves a run as completed.
func (c *Client) ReportCompleted(ctx context.Context, taskID string, runID int) (*TaskStatus, error) {
	var out StatusResponse
	if err := c.Do(ctx, http.MethodPost, runPath(taskID, runID)+"/completed", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("reporting task %s run %d completed: %w", taskID, runID, err)
	}
	return &out.Status, nil
}

// ReportFailed resolves a run as failed.
func (c *Client) ReportFailed(ctx context.Context, taskID string, runID int) (*TaskStatus, error) {
	var out StatusResponse
	if err := c.Do(ctx, http.MethodPost, runPath(taskID, runID)+"/failed", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("reporting task %s run %d failed: %w", taskID, runID, err)
	}
	return &out.Status, nil
}

// ReportException resolves a run as exception with the given reason.
func (c *Client) ReportException(ctx context.Context, taskID string, runID int, reason string) (*TaskStatus, error) {
	var out StatusResponse
	err := c.Do(ctx, http.MethodPost, runPath(taskID, runID)+"/exception", nil, &ExceptionRequest{Reason: reason}, &out)
	if err != nil {
		return nil, fmt.Errorf("reporting task %s run %d exception/%s: %w", taskID, runID, reason, err)
	}
	return &out.Status, nil
}

// CreateArtifact creates (or compatibly re-creates) an artifact on a run.
// For s3 artifacts the reply's PutURL is where the bytes go (see Upload).
func (c *Client) CreateArtifact(ctx context.Context, taskID string, runID int, name string, req *CreateArtifactRequest) (*CreateArtifactResponse, error) {
	var raw json.RawMessage
	path := runPath(taskID, runID) + "/artifacts/" + EscapePathParam(name)
	if err := c.Do(ctx, http.MethodPost, path, nil, req, &raw); err != nil {
		return nil, fmt.Errorf("creating artifact %s on task %s run %d: %w", name, taskID, runID, err)
	}
	out := &CreateArtifactResponse{Raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("decoding createArtifact reply for %s: %w", name, err)
		}
	}
	return out, nil
}

// GetArtifact asks where an artifact of a specific run lives. The queue
// answers 303 with a JSON body; the redirect is not followed. Error
// artifacts produce an *APIError with StatusCode 424 and Reason set.
func (c *Client) GetArtifact(ctx context.Context, taskID string, runID int, name string) (*ArtifactRedirect, error) {
	return c.getArtifact(ctx, runPath(taskID, runID)+"/artifacts/"+EscapePathParam(name), taskID, name)
}

// GetLatestArtifact is GetArtifact for the task's latest run.
func (c *Client) GetLatestArtifact(ctx context.Context, taskID, name string) (*ArtifactRedirect, error) {
	return c.getArtifact(ctx, taskPath(taskID)+"/artifacts/"+EscapePathParam(name), taskID, name)
}

func (c *Client) getArtifact(ctx context.Context, path, taskID, name string) (*ArtifactRedirect, error) {
	var out ArtifactRedirect
	rep, err := c.do(ctx, http.MethodGet, path, nil, nil, &out)
	if err != nil {
		return nil, fmt.Errorf("getting artifact %s of task %s: %w", name, taskID, err)
	}
	out.Location = rep.header.Get("Location")
	if out.URL == "" {
		out.URL = out.Location
	}
	if out.URL == "" {
		return nil, fmt.Errorf("getting artifact %s of task %s: reply %d carried no URL", name, taskID, rep.status)
	}
	return &out, nil
}

// ListArtifacts returns one page of a run's artifacts.
func (c *Client) ListArtifacts(ctx context.Context, taskID string, runID int, opts ListOptions) (*ListArtifactsResponse, error) {
	var out ListArtifactsResponse
	if err := c.Do(ctx, http.MethodGet, runPath(taskID, runID)+"/artifacts", listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing artifacts of task %s run %d: %w", taskID, runID, err)
	}
	return &out, nil
}

// CancelTask cancels a task; a running run becomes exception/canceled and
// its worker's next reclaim gets 409.
func (c *Client) CancelTask(ctx context.Context, taskID string) (*TaskStatus, error) {
	var out StatusResponse
	if err := c.Do(ctx, http.MethodPost, taskPath(taskID)+"/cancel", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("cancelling task %s: %w", taskID, err)
	}
	return &out.Status, nil
}

// RerunTask adds a new pending run to a resolved task.
func (c *Client) RerunTask(ctx context.Context, taskID string) (*TaskStatus, error) {
	var out StatusResponse
	if err := c.Do(ctx, http.MethodPost, taskPath(taskID)+"/rerun", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("rerunning task %s: %w", taskID, err)
	}
	return &out.Status, nil
}

// ListTaskGroup returns one page of a task group's members.
func (c *Client) ListTaskGroup(ctx context.Context, taskGroupID string, opts ListOptions) (*ListTaskGroupResponse, error) {
	var out ListTaskGroupResponse
	path := "/task-group/" + EscapePathParam(taskGroupID) + "/list"
	if err := c.Do(ctx, http.MethodGet, path, listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing task group %s: %w", taskGroupID, err)
	}
	return &out, nil
}

// TaskQueueCounts returns the approximate pending and claimed counts of a
// task queue.
func (c *Client) TaskQueueCounts(ctx context.Context, taskQueueID string) (*TaskQueueCountsResponse, error) {
	var out TaskQueueCountsResponse
	path := "/task-queues/" + EscapePathParam(taskQueueID) + "/counts"
	if err := c.Do(ctx, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, fmt.Errorf("counting tasks of %s: %w", taskQueueID, err)
	}
	return &out, nil
}

// QueueWorker is one worker of the Queue's listWorkers: Taskcluster's
// fields and hopper's online, capacity and busy (docs/history.md).
type QueueWorker struct {
	WorkerGroup     string `json:"workerGroup"`
	WorkerID        string `json:"workerId"`
	FirstClaim      Time   `json:"firstClaim"`
	LastDateActive  Time   `json:"lastDateActive"`
	QuarantineUntil Time   `json:"quarantineUntil"`
	LatestTask      *struct {
		TaskID string `json:"taskId"`
		RunID  int    `json:"runId"`
	} `json:"latestTask,omitempty"`
	Online   bool `json:"online"`
	Capacity int  `json:"capacity"`
	Busy     int  `json:"busy"`
	// State is the worker's state in its worker pool ("standalone" when
	// no pool knows it); ProviderID its pool's provider.
	State      string `json:"state,omitempty"`
	ProviderID string `json:"providerId,omitempty"`
}

// ListWorkersResponse is one page of ListWorkers.
type ListWorkersResponse struct {
	Workers           []QueueWorker `json:"workers"`
	ContinuationToken string        `json:"continuationToken,omitempty"`
}

// ListWorkers returns one page of the workers of a task queue
// (<provisionerId>/<workerType>) that the queue has seen.
func (c *Client) ListWorkers(ctx context.Context, taskQueueID string, opts ListOptions) (*ListWorkersResponse, error) {
	provisioner, workerType, ok := strings.Cut(taskQueueID, "/")
	if !ok {
		return nil, fmt.Errorf("task queue id %q is not <provisionerId>/<workerType>", taskQueueID)
	}
	var out ListWorkersResponse
	path := "/provisioners/" + EscapePathParam(provisioner) + "/worker-types/" + EscapePathParam(workerType) + "/workers"
	if err := c.Do(ctx, http.MethodGet, path, listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing the workers of %s: %w", taskQueueID, err)
	}
	return &out, nil
}
