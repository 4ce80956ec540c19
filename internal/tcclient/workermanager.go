package tcclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// WorkerPool is a worker pool as the Worker Manager answers it.
type WorkerPool struct {
	WorkerPoolID      string          `json:"workerPoolId,omitempty"`
	ProviderID        string          `json:"providerId"`
	Description       string          `json:"description"`
	Config            json.RawMessage `json:"config"`
	Owner             string          `json:"owner"`
	EmailOnError      bool            `json:"emailOnError"`
	Created           string          `json:"created,omitempty"`
	LastModified      string          `json:"lastModified,omitempty"`
	CurrentCapacity   int             `json:"currentCapacity,omitempty"`
	RequestedCount    int             `json:"requestedCount,omitempty"`
	RunningCount      int             `json:"runningCount,omitempty"`
	StoppingCount     int             `json:"stoppingCount,omitempty"`
	StoppedCount      int             `json:"stoppedCount,omitempty"`
	RequestedCapacity int             `json:"requestedCapacity,omitempty"`
	RunningCapacity   int             `json:"runningCapacity,omitempty"`
	StoppingCapacity  int             `json:"stoppingCapacity,omitempty"`
	StoppedCapacity   int             `json:"stoppedCapacity,omitempty"`
}

// WorkerPoolDefinition is the body of createWorkerPool and updateWorkerPool.
type WorkerPoolDefinition struct {
	ProviderID   string          `json:"providerId"`
	Description  string          `json:"description"`
	Config       json.RawMessage `json:"config"`
	Owner        string          `json:"owner"`
	EmailOnError bool            `json:"emailOnError"`
}

// PoolWorker is a worker of a pool (worker-full).
type PoolWorker struct {
	WorkerPoolID string `json:"workerPoolId"`
	WorkerGroup  string `json:"workerGroup"`
	WorkerID     string `json:"workerId"`
	ProviderID   string `json:"providerId"`
	Created      string `json:"created"`
	Expires      string `json:"expires"`
	LastModified string `json:"lastModified"`
	State        string `json:"state"`
	Capacity     int    `json:"capacity"`
}

// PoolError is an error reported about a pool.
type PoolError struct {
	ErrorID     string         `json:"errorId"`
	Reported    string         `json:"reported"`
	Kind        string         `json:"kind"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Extra       map[string]any `json:"extra"`
}

// WorkerRegistration is registerWorker's and reregisterWorker's reply.
type WorkerRegistration struct {
	Expires      Time            `json:"expires"`
	Credentials  Credentials     `json:"credentials"`
	WorkerConfig json.RawMessage `json:"workerConfig,omitempty"`
	Secret       string          `json:"secret"`
}

// WorkerManagerBaseURL returns the Worker Manager API base URL.
func (c *Client) WorkerManagerBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/worker-manager/v1"
}

func (c *Client) doWM(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := c.doAt(ctx, c.WorkerManagerBaseURL(), method, path, query, in, out)
	return err
}

func poolPath(workerPoolID string) string { return "/worker-pool/" + EscapePathParam(workerPoolID) }

func poolWorkerPath(workerPoolID, group, id string) string {
	return "/workers/" + EscapePathParam(workerPoolID) + "/" + EscapePathParam(group) + "/" + EscapePathParam(id)
}

// CreateWorkerPool creates a pool.
func (c *Client) CreateWorkerPool(ctx context.Context, workerPoolID string, def *WorkerPoolDefinition) (*WorkerPool, error) {
	var out WorkerPool
	return &out, c.doWM(ctx, http.MethodPut, poolPath(workerPoolID), nil, def, &out)
}

// UpdateWorkerPool replaces a pool's definition.
func (c *Client) UpdateWorkerPool(ctx context.Context, workerPoolID string, def *WorkerPoolDefinition) (*WorkerPool, error) {
	var out WorkerPool
	return &out, c.doWM(ctx, http.MethodPost, poolPath(workerPoolID), nil, def, &out)
}

// DeleteWorkerPool marks a pool deleted (its provider becomes
// null-provider; it goes once its workers are gone).
func (c *Client) DeleteWorkerPool(ctx context.Context, workerPoolID string) (*WorkerPool, error) {
	var out WorkerPool
	return &out, c.doWM(ctx, http.MethodDelete, poolPath(workerPoolID), nil, nil, &out)
}

// GetWorkerPool reads a pool.
func (c *Client) GetWorkerPool(ctx context.Context, workerPoolID string) (*WorkerPool, error) {
	var out WorkerPool
	return &out, c.doWM(ctx, http.MethodGet, poolPath(workerPoolID), nil, nil, &out)
}

// AllWorkerPools lists every pool, following continuation tokens.
func (c *Client) AllWorkerPools(ctx context.Context) ([]WorkerPool, error) {
	var all []WorkerPool
	q := url.Values{}
	for {
		var page struct {
			WorkerPools       []WorkerPool `json:"workerPools"`
			ContinuationToken string       `json:"continuationToken"`
		}
		if err := c.doWM(ctx, http.MethodGet, "/worker-pools", q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.WorkerPools...)
		if page.ContinuationToken == "" {
			return all, nil
		}
		q.Set("continuationToken", page.ContinuationToken)
	}
}

// AllPoolWorkers lists every worker of a pool.
func (c *Client) AllPoolWorkers(ctx context.Context, workerPoolID string) ([]PoolWorker, error) {
	var all []PoolWorker
	q := url.Values{}
	for {
		var page struct {
			Workers           []PoolWorker `json:"workers"`
			ContinuationToken string       `json:"continuationToken"`
		}
		if err := c.doWM(ctx, http.MethodGet, "/workers/"+EscapePathParam(workerPoolID), q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Workers...)
		if page.ContinuationToken == "" {
			return all, nil
		}
		q.Set("continuationToken", page.ContinuationToken)
	}
}

// ListWorkerPoolErrors lists a pool's latest errors (one page).
func (c *Client) ListWorkerPoolErrors(ctx context.Context, workerPoolID string, limit int) ([]PoolError, error) {
	var page struct {
		WorkerPoolErrors []PoolError `json:"workerPoolErrors"`
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	err := c.doWM(ctx, http.MethodGet, "/worker-pool-errors/"+EscapePathParam(workerPoolID), q, nil, &page)
	return page.WorkerPoolErrors, err
}

// CreateStaticWorker adds a worker to a static pool, known by its secret.
func (c *Client) CreateStaticWorker(ctx context.Context, workerPoolID, group, id string, expires Time, capacity int, staticSecret string) (*PoolWorker, error) {
	body := map[string]any{"expires": expires, "providerInfo": map[string]string{"staticSecret": staticSecret}}
	if capacity > 0 {
		body["capacity"] = capacity
	}
	var out PoolWorker
	return &out, c.doWM(ctx, http.MethodPut, poolWorkerPath(workerPoolID, group, id), nil, body, &out)
}

// GetPoolWorker reads a worker of a pool.
func (c *Client) GetPoolWorker(ctx context.Context, workerPoolID, group, id string) (*PoolWorker, error) {
	var out PoolWorker
	return &out, c.doWM(ctx, http.MethodGet, poolWorkerPath(workerPoolID, group, id), nil, nil, &out)
}

// RemoveWorker removes a worker from its pool.
func (c *Client) RemoveWorker(ctx context.Context, workerPoolID, group, id string) error {
	return c.doWM(ctx, http.MethodDelete, poolWorkerPath(workerPoolID, group, id), nil, nil, nil)
}

// RegisterStaticWorker registers a static worker with its secret (no
// credentials needed: the secret is the proof).
func (c *Client) RegisterStaticWorker(ctx context.Context, workerPoolID, providerID, group, id, staticSecret string) (*WorkerRegistration, error) {
	return c.RegisterWorker(ctx, workerPoolID, providerID, group, id, map[string]string{"staticSecret": staticSecret})
}

// RegisterWorker registers a worker with the proof of identity its
// provider asks for (a static secret, a Kubernetes Pod's token).
func (c *Client) RegisterWorker(ctx context.Context, workerPoolID, providerID, group, id string, proof map[string]string) (*WorkerRegistration, error) {
	body := map[string]any{"workerPoolId": workerPoolID, "providerId": providerID, "workerGroup": group, "workerId": id,
		"workerIdentityProof": proof}
	var out WorkerRegistration
	return &out, c.doWM(ctx, http.MethodPost, "/worker/register", nil, body, &out)
}

// ReregisterWorker trades the last registration's secret for fresh
// credentials (signed with the worker's current credentials).
func (c *Client) ReregisterWorker(ctx context.Context, workerPoolID, group, id, secret string) (*WorkerRegistration, error) {
	body := map[string]any{"workerPoolId": workerPoolID, "workerGroup": group, "workerId": id, "secret": secret}
	var out WorkerRegistration
	return &out, c.doWM(ctx, http.MethodPost, "/worker/reregister", nil, body, &out)
}

// ShouldWorkerTerminate asks whether the worker should stop (removed or
// expired), with the reason.
func (c *Client) ShouldWorkerTerminate(ctx context.Context, workerPoolID, group, id string) (bool, string, error) {
	var out struct {
		Terminate bool   `json:"terminate"`
		Reason    string `json:"reason"`
	}
	err := c.doWM(ctx, http.MethodGet, poolWorkerPath(workerPoolID, group, id)+"/should-terminate", nil, nil, &out)
	return out.Terminate, out.Reason, err
}
