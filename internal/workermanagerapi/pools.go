package workermanagerapi

import (
	"encoding/json"
	"errors"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// poolJSON is a pool as worker-pool-full.json shows it.
type poolJSON struct {
	WorkerPoolID      string          `json:"workerPoolId"`
	ProviderID        string          `json:"providerId"`
	Description       string          `json:"description"`
	Created           queue.Time      `json:"created"`
	LastModified      queue.Time      `json:"lastModified"`
	Config            json.RawMessage `json:"config"`
	Owner             string          `json:"owner"`
	EmailOnError      bool            `json:"emailOnError"`
	CurrentCapacity   int             `json:"currentCapacity"`
	RequestedCount    int             `json:"requestedCount"`
	RunningCount      int             `json:"runningCount"`
	StoppingCount     int             `json:"stoppingCount"`
	StoppedCount      int             `json:"stoppedCount"`
	RequestedCapacity int             `json:"requestedCapacity"`
	RunningCapacity   int             `json:"runningCapacity"`
	StoppingCapacity  int             `json:"stoppingCapacity"`
	StoppedCapacity   int             `json:"stoppedCapacity"`
}

func poolOut(p *workermanager.Pool, c workermanager.Counts) poolJSON {
	return poolJSON{
		WorkerPoolID: p.WorkerPoolID, ProviderID: p.ProviderID, Description: p.Description,
		Created: timeOut(p.Created), LastModified: timeOut(p.LastModified), Config: p.Config, Owner: p.Owner, EmailOnError: p.EmailOnError,
		CurrentCapacity: c.Current(), RequestedCount: c.RequestedCount, RunningCount: c.RunningCount, StoppingCount: c.StoppingCount,
		StoppedCount: c.StoppedCount, RequestedCapacity: c.RequestedCapacity, RunningCapacity: c.RunningCapacity,
		StoppingCapacity: c.StoppingCapacity, StoppedCapacity: c.StoppedCapacity,
	}
}

// statsJSON is one pool's counts (worker-pool-list-stats.json).
type statsJSON struct {
	WorkerPoolID      string `json:"workerPoolId"`
	CurrentCapacity   int    `json:"currentCapacity"`
	RequestedCount    int    `json:"requestedCount"`
	RunningCount      int    `json:"runningCount"`
	StoppingCount     int    `json:"stoppingCount"`
	StoppedCount      int    `json:"stoppedCount"`
	RequestedCapacity int    `json:"requestedCapacity"`
	RunningCapacity   int    `json:"runningCapacity"`
	StoppingCapacity  int    `json:"stoppingCapacity"`
	StoppedCapacity   int    `json:"stoppedCapacity"`
}

func statsOut(id string, c workermanager.Counts) statsJSON {
	return statsJSON{id, c.Current(), c.RequestedCount, c.RunningCount, c.StoppingCount, c.StoppedCount,
		c.RequestedCapacity, c.RunningCapacity, c.StoppingCapacity, c.StoppedCapacity}
}

func (h *handlers) counts(c *api.Call, ids ...string) (map[string]workermanager.Counts, error) {
	return h.Store.WorkerPoolCounts(c.Context(), ids)
}

type poolInput struct {
	ProviderID   string          `json:"providerId"`
	Description  string          `json:"description"`
	Config       json.RawMessage `json:"config"`
	Owner        string          `json:"owner"`
	EmailOnError bool            `json:"emailOnError"`
	WorkerPoolID string          `json:"workerPoolId"`
}

// checkProvider finds the provider a pool names and validates the pool's
// config against its type's schema and rules.
func (h *handlers) checkProvider(in *poolInput) error {
	if in.ProviderID == workermanager.NullProvider {
		return nil
	}
	p, ok := h.providers[in.ProviderID]
	if !ok {
		valid := make([]string, 0, len(h.providers))
		for id := range h.providers {
			valid = append(valid, id)
		}
		return &api.Error{Code: api.CodeInputError, Message: "Invalid Provider",
			Details: map[string]any{"providerId": in.ProviderID, "validProviderIds": valid}}
	}
	schemas, err := h.schemas()
	if err != nil {
		return err
	}
	if _, err := schemas.Validate("worker-pool-config-"+p.Type, in.Config); err != nil {
		var ve interface{ Error() string }
		if errors.As(err, &ve) {
			return &api.Error{Code: api.CodeInputValidationError, Message: "The worker pool's config does not match the " + p.Type + " provider's schema:\n" + err.Error()}
		}
		return err
	}
	if err := workermanager.CheckConfig(p.Type, in.Config); err != nil {
		return &api.Error{Code: api.CodeInputValidationError, Message: err.Error()}
	}
	return nil
}

// poolChange reads the pool and body of a createWorkerPool or
// updateWorkerPool call, checks the caller's scopes for both and the
// pool's config against its provider.
func (h *handlers) poolChange(c *api.Call) (string, *poolInput, error) {
	id, err := poolIDOf(c)
	if err != nil {
		return "", nil, err
	}
	var in poolInput
	if err := c.Decode(&in); err != nil {
		return "", nil, err
	}
	if err := authorize(c, map[string]any{"workerPoolId": id, "providerId": in.ProviderID}); err != nil {
		return "", nil, err
	}
	return id, &in, h.checkProvider(&in)
}

func (h *handlers) createWorkerPool(c *api.Call) (any, error) {
	id, in, err := h.poolChange(c)
	if err != nil {
		return nil, err
	}
	p := &workermanager.Pool{WorkerPoolID: id, ProviderID: in.ProviderID, PreviousProviderIDs: []string{}, Description: in.Description,
		Config: in.Config, Owner: in.Owner, EmailOnError: in.EmailOnError, Created: c.Now, LastModified: c.Now}
	if err := h.Store.CreateWorkerPool(c.Context(), p); errors.Is(err, store.ErrExists) {
		return nil, conflict("Worker pool already exists")
	} else if err != nil {
		return nil, err
	}
	h.audit(c, "worker pool created", "workerPoolId", id, "providerId", in.ProviderID)
	h.publish(c, exchangePoolCreated, poolMessage(p, ""))
	return poolOut(p, workermanager.Counts{}), nil
}

func (h *handlers) updateWorkerPool(c *api.Call) (any, error) {
	id, in, err := h.poolChange(c)
	if err != nil {
		return nil, err
	}
	if in.WorkerPoolID != "" && in.WorkerPoolID != id {
		return nil, inputError("Incorrect workerPoolId in request body")
	}
	previous := ""
	p, err := h.Store.UpdateWorkerPool(c.Context(), id, func(p *workermanager.Pool) error {
		previous = p.ProviderID
		p.ChangeProvider(in.ProviderID)
		p.Description, p.Config, p.Owner, p.EmailOnError, p.LastModified = in.Description, in.Config, in.Owner, in.EmailOnError, c.Now
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker pool does not exist")
	}
	if err != nil {
		return nil, err
	}
	h.audit(c, "worker pool updated", "workerPoolId", id, "providerId", in.ProviderID)
	h.publish(c, exchangePoolUpdated, poolMessage(p, previous))
	return h.poolWithCounts(c, p)
}

func (h *handlers) poolWithCounts(c *api.Call, p *workermanager.Pool) (any, error) {
	counts, err := h.counts(c, p.WorkerPoolID)
	if err != nil {
		return nil, err
	}
	return poolOut(p, counts[p.WorkerPoolID]), nil
}

func (h *handlers) deleteWorkerPool(c *api.Call) (any, error) {
	id, err := authorizedPool(c)
	if err != nil {
		return nil, err
	}
	previous := ""
	p, err := h.Store.UpdateWorkerPool(c.Context(), id, func(p *workermanager.Pool) error {
		previous = p.ProviderID
		p.ChangeProvider(workermanager.NullProvider)
		p.LastModified = c.Now
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker pool does not exist")
	}
	if err != nil {
		return nil, err
	}
	h.audit(c, "worker pool deleted", "workerPoolId", id)
	h.publish(c, exchangePoolUpdated, poolMessage(p, previous))
	return h.poolWithCounts(c, p)
}

func (h *handlers) loadPool(c *api.Call, id string) (*workermanager.Pool, error) {
	p, err := h.Store.GetWorkerPool(c.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker pool does not exist")
	}
	return p, err
}

func (h *handlers) workerPool(c *api.Call) (any, error) {
	id, err := authorizedPool(c)
	if err != nil {
		return nil, err
	}
	p, err := h.loadPool(c, id)
	if err != nil {
		return nil, err
	}
	return h.poolWithCounts(c, p)
}

// poolsPage reads one page of pools with their ids and their workers'
// counts, for the two listings of pools.
func (h *handlers) poolsPage(c *api.Call) (pools []workermanager.Pool, ids []string, counts map[string]workermanager.Counts, next string, err error) {
	pools, next, err = h.Store.ListWorkerPools(c.Context(), c.Page())
	if err != nil {
		return nil, nil, nil, "", err
	}
	ids = make([]string, len(pools))
	for i := range pools {
		ids[i] = pools[i].WorkerPoolID
	}
	counts, err = h.counts(c, ids...)
	if err != nil {
		return nil, nil, nil, "", err
	}
	return pools, ids, counts, next, nil
}

func (h *handlers) listWorkerPools(c *api.Call) (any, error) {
	if err := authorize(c, nil); err != nil {
		return nil, err
	}
	pools, _, counts, next, err := h.poolsPage(c)
	if err != nil {
		return nil, err
	}
	out := make([]poolJSON, len(pools))
	for i := range pools {
		out[i] = poolOut(&pools[i], counts[pools[i].WorkerPoolID])
	}
	return struct {
		WorkerPools       []poolJSON `json:"workerPools"`
		ContinuationToken string     `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (h *handlers) listWorkerPoolsStats(c *api.Call) (any, error) {
	if err := authorize(c, nil); err != nil {
		return nil, err
	}
	_, ids, counts, next, err := h.poolsPage(c)
	if err != nil {
		return nil, err
	}
	out := make([]statsJSON, len(ids))
	for i, id := range ids {
		out[i] = statsOut(id, counts[id])
	}
	return struct {
		WorkerPoolsStats  []statsJSON `json:"workerPoolsStats"`
		ContinuationToken string      `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

// workerPoolStats answers the pool's counts by launch configuration:
// hopper's pools have none, so there is one entry, "unknown" as
// Taskcluster names workers without one, when the pool has workers.
func (h *handlers) workerPoolStats(c *api.Call) (any, error) {
	id, err := authorizedPool(c)
	if err != nil {
		return nil, err
	}
	if _, err := h.loadPool(c, id); err != nil {
		return nil, err
	}
	counts, err := h.counts(c, id)
	if err != nil {
		return nil, err
	}
	type lcStats struct {
		statsJSON
		LaunchConfigID string `json:"launchConfigId"`
	}
	out := []lcStats{}
	if cnt, ok := counts[id]; ok {
		out = append(out, lcStats{statsOut(id, cnt), "unknown"})
	}
	return map[string]any{"launchConfigStats": out}, nil
}

// listLaunchConfigs answers a pool's launch configurations: hopper's
// providers take one configuration per pool, none of them a launch
// configuration of Taskcluster's cloud providers, so the list is empty.
func (h *handlers) listLaunchConfigs(c *api.Call) (any, error) {
	id, err := authorizedPool(c)
	if err != nil {
		return nil, err
	}
	if v := c.R.URL.Query().Get("includeArchived"); v != "" && v != "true" && v != "false" {
		return nil, api.InvalidQuery("includeArchived", v, boolPattern)
	}
	if _, err := h.loadPool(c, id); err != nil {
		return nil, err
	}
	return map[string]any{"workerPoolLaunchConfigs": []any{}}, nil
}

// errorJSON is an error as worker-pool-error.json shows it.
type errorJSON struct {
	WorkerPoolID   string         `json:"workerPoolId"`
	ErrorID        string         `json:"errorId"`
	Reported       queue.Time     `json:"reported"`
	Kind           string         `json:"kind"`
	Title          string         `json:"title"`
	Description    string         `json:"description"`
	Extra          map[string]any `json:"extra"`
	LaunchConfigID string         `json:"launchConfigId,omitempty"`
}

func errorOut(e *workermanager.PoolError) errorJSON {
	extra := e.Extra
	if extra == nil {
		extra = map[string]any{}
	}
	return errorJSON{e.WorkerPoolID, e.ErrorID, timeOut(e.Reported), e.Kind, e.Title, e.Description, extra, e.LaunchConfigID}
}

func (h *handlers) reportWorkerError(c *api.Call) (any, error) {
	id, err := poolIDOf(c)
	if err != nil {
		return nil, err
	}
	var in struct {
		WorkerGroup string         `json:"workerGroup"`
		WorkerID    string         `json:"workerId"`
		Kind        string         `json:"kind"`
		Title       string         `json:"title"`
		Description string         `json:"description"`
		Extra       map[string]any `json:"extra"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if err := authorize(c, map[string]any{"workerPoolId": id, "workerGroup": in.WorkerGroup, "workerId": in.WorkerID}); err != nil {
		return nil, err
	}
	p, err := h.loadPool(c, id)
	if err != nil {
		return nil, err
	}
	if in.Extra == nil {
		in.Extra = map[string]any{}
	}
	in.Extra["workerGroup"], in.Extra["workerId"] = in.WorkerGroup, in.WorkerID
	e := &workermanager.PoolError{WorkerPoolID: id, ErrorID: ident.NewSlugID(), Reported: c.Now, Kind: in.Kind, Title: in.Title,
		Description: in.Description, Extra: in.Extra}
	if w, err := h.Store.GetPoolWorker(c.Context(), workermanager.Key{WorkerPoolID: id, WorkerGroup: in.WorkerGroup, WorkerID: in.WorkerID}); err == nil {
		e.LaunchConfigID = w.LaunchConfigID
	}
	if err := h.Store.AddWorkerPoolError(c.Context(), e); err != nil {
		return nil, err
	}
	h.publish(c, exchangePoolError, errorMessage(p, e, in.WorkerGroup, in.WorkerID))
	return errorOut(e), nil
}

func (h *handlers) listWorkerPoolErrors(c *api.Call) (any, error) {
	id, err := authorizedPool(c)
	if err != nil {
		return nil, err
	}
	q := c.R.URL.Query()
	f := store.PoolErrorFilter{WorkerPoolID: id, ErrorID: q.Get("errorId"), LaunchConfigID: q.Get("launchConfigId")}
	if f.ErrorID != "" && !errorIDPattern.MatchString(f.ErrorID) {
		return nil, api.InvalidQuery("errorId", f.ErrorID, errorIDPattern)
	}
	if f.LaunchConfigID != "" && !launchConfigPattern.MatchString(f.LaunchConfigID) {
		return nil, api.InvalidQuery("launchConfigId", f.LaunchConfigID, launchConfigPattern)
	}
	errs, next, err := h.Store.ListWorkerPoolErrors(c.Context(), f, c.Page())
	if err != nil {
		return nil, err
	}
	out := make([]errorJSON, len(errs))
	for i := range errs {
		out[i] = errorOut(&errs[i])
	}
	return struct {
		WorkerPoolErrors  []errorJSON `json:"workerPoolErrors"`
		ContinuationToken string      `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (h *handlers) workerPoolErrorStats(c *api.Call) (any, error) {
	id := c.R.URL.Query().Get("workerPoolId")
	if id != "" && !errorStatsPoolPattern.MatchString(id) {
		return nil, api.InvalidQuery("workerPoolId", id, errorStatsPoolPattern)
	}
	scopeID := id
	if id == "" {
		scopeID = "*"
	}
	if err := authorize(c, map[string]any{"workerPoolId": scopeID}); err != nil {
		return nil, err
	}
	if id != "" {
		if _, err := h.loadPool(c, id); err != nil {
			return nil, err
		}
	}
	errs, err := h.Store.WorkerPoolErrorsSince(c.Context(), id, c.Now.Add(-workermanager.ErrorStatsWindow))
	if err != nil {
		return nil, err
	}
	t := workermanager.SummariseErrors(errs, c.Now, id != "")
	return map[string]any{"workerPoolId": id, "totals": map[string]any{
		"total": t.Total, "daily": t.Daily, "hourly": t.Hourly, "title": t.Title, "code": t.Code,
		"workerPool": t.WorkerPool, "launchConfig": t.LaunchConfig,
	}}, nil
}
