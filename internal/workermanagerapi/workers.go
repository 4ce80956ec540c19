package workermanagerapi

import (
	"errors"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// workerJSON is a worker as worker-full.json shows it.
type workerJSON struct {
	WorkerPoolID   string     `json:"workerPoolId"`
	WorkerGroup    string     `json:"workerGroup"`
	WorkerID       string     `json:"workerId"`
	ProviderID     string     `json:"providerId"`
	Created        queue.Time `json:"created"`
	Expires        queue.Time `json:"expires"`
	LastModified   queue.Time `json:"lastModified"`
	LastChecked    queue.Time `json:"lastChecked"`
	State          string     `json:"state"`
	Capacity       int        `json:"capacity"`
	LaunchConfigID string     `json:"launchConfigId,omitempty"`
}

func workerOut(w *workermanager.Worker) workerJSON {
	return workerJSON{w.WorkerPoolID, w.WorkerGroup, w.WorkerID, w.ProviderID, timeOut(w.Created), timeOut(w.Expires),
		timeOut(w.LastModified), timeOut(w.LastChecked), string(w.State), w.Capacity, w.LaunchConfigID}
}

func workerKey(c *api.Call) (workermanager.Key, error) {
	id, err := poolIDOf(c)
	if err != nil {
		return workermanager.Key{}, err
	}
	return workermanager.Key{WorkerPoolID: id, WorkerGroup: c.Params["workerGroup"], WorkerID: c.Params["workerId"]}, nil
}

func keyParams(k workermanager.Key) map[string]any {
	return map[string]any{"workerPoolId": k.WorkerPoolID, "workerGroup": k.WorkerGroup, "workerId": k.WorkerID}
}

// authorizedKey reads the worker's key and checks the route's scopes.
func authorizedKey(c *api.Call) (workermanager.Key, error) {
	k, err := workerKey(c)
	if err != nil {
		return k, err
	}
	return k, authorize(c, keyParams(k))
}

// authorizedWorker reads the worker's key, checks the route's scopes and
// loads the worker.
func (h *handlers) authorizedWorker(c *api.Call) (workermanager.Key, *workermanager.Worker, error) {
	k, err := authorizedKey(c)
	if err != nil {
		return k, nil, err
	}
	w, err := h.Store.GetPoolWorker(c.Context(), k)
	if errors.Is(err, store.ErrNotFound) {
		return k, nil, notFound("Worker not found")
	}
	return k, w, err
}

// providerOf finds the provider of a pool or worker.
func (h *handlers) providerOf(id, what string) (Provider, error) {
	p, ok := h.providers[id]
	if !ok {
		return Provider{}, notFound("Provider %s for %s does not exist", id, what)
	}
	return p, nil
}

type workerInput struct {
	Expires      queue.Time `json:"expires"`
	Capacity     int        `json:"capacity"`
	ProviderInfo struct {
		StaticSecret string `json:"staticSecret"`
	} `json:"providerInfo"`
}

// workerChange reads the worker and body of a createWorker or
// updateWorker call, after checking the caller's scopes, with the
// worker's pool.
func (h *handlers) workerChange(c *api.Call) (workermanager.Key, *workerInput, *workermanager.Pool, error) {
	k, err := authorizedKey(c)
	if err != nil {
		return k, nil, nil, err
	}
	var in workerInput
	if err := c.Decode(&in); err != nil {
		return k, nil, nil, err
	}
	pool, err := h.Store.GetWorkerPool(c.Context(), k.WorkerPoolID)
	if errors.Is(err, store.ErrNotFound) {
		return k, nil, nil, notFound("Worker pool %s does not exist", k.WorkerPoolID)
	}
	return k, &in, pool, err
}

// requireStatic refuses to change the workers of a pool whose provider
// is not static: other providers make their workers themselves.
func (h *handlers) requireStatic(pool *workermanager.Pool) error {
	prov, err := h.providerOf(pool.ProviderID, "worker pool "+pool.WorkerPoolID)
	if err == nil && prov.Type != workermanager.ProviderTypeStatic {
		err = inputError("not supported for this provider")
	}
	return err
}

func (h *handlers) createWorker(c *api.Call) (any, error) {
	k, in, pool, err := h.workerChange(c)
	if err != nil {
		return nil, err
	}
	if in.Expires.Before(c.Now) {
		return nil, inputError("worker.expires must be in the future")
	}
	if err := h.requireStatic(pool); err != nil {
		return nil, err
	}
	w, err := workermanager.NewStaticWorker(pool, k.WorkerGroup, k.WorkerID, in.Capacity, in.Expires.Time, in.ProviderInfo.StaticSecret, c.Now)
	if err != nil {
		return nil, refusal(err)
	}
	got, err := h.Store.CreatePoolWorker(c.Context(), w)
	if errors.Is(err, store.ErrExists) {
		if !got.SameStaticWorker(pool.ProviderID, in.ProviderInfo.StaticSecret) {
			return nil, inputError("worker already exists")
		}
		return workerOut(got), nil
	}
	if err != nil {
		return nil, err
	}
	h.audit(c, "worker created", "worker", k.String())
	return workerOut(got), nil
}

func (h *handlers) updateWorker(c *api.Call) (any, error) {
	k, in, pool, err := h.workerChange(c)
	if err != nil {
		return nil, err
	}
	if err := h.requireStatic(pool); err != nil {
		return nil, err
	}
	w, err := h.Store.UpdatePoolWorker(c.Context(), k, func(w *workermanager.Worker) error {
		// As in Taskcluster, expires may be in the past: that expires the
		// worker at once.
		w.UpdateStatic(in.Capacity, in.Expires.Time, in.ProviderInfo.StaticSecret, c.Now)
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker %s does not exist", k)
	}
	if err != nil {
		return nil, err
	}
	h.audit(c, "worker updated", "worker", k.String())
	return workerOut(w), nil
}

// removeWorker stops a worker: a static one at once, a dynamic one once
// its provider has stopped it. Its claimed runs are resolved
// exception/worker-shutdown and retried now rather than at claim expiry.
func (h *handlers) removeWorker(c *api.Call) (any, error) {
	k, w, err := h.authorizedWorker(c)
	if err != nil {
		return nil, err
	}
	prov, err := h.providerOf(w.ProviderID, "this worker")
	if err != nil {
		return nil, err
	}
	removed := false
	w, err = h.Store.UpdatePoolWorker(c.Context(), k, func(w *workermanager.Worker) error {
		removed = w.Remove(prov.Type, c.Now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if removed {
		h.audit(c, "worker removed", "worker", k.String())
	}
	// A repeat resolves too: the first call may have stopped the worker
	// and ended (its replica killed) before resolving its runs. Resolving
	// is idempotent; the worker scanner does the same for any stopped
	// worker that still holds runs.
	h.resolveRuns(c, w)
	if removed {
		h.announceRemoved(c, w, "workerManager.removeWorker API call")
	}
	return map[string]any{}, nil
}

// resolveRuns resolves what the worker holds exception/worker-shutdown.
func (h *handlers) resolveRuns(c *api.Call, w *workermanager.Worker) {
	if h.Resolver != nil {
		n, err := h.Resolver.ResolveWorkerRuns(c.Context(), store.WorkerKey{TaskQueueID: w.WorkerPoolID, WorkerGroup: w.WorkerGroup, WorkerID: w.WorkerID}, c.Now)
		if err != nil {
			h.Logger.Error("resolving a removed worker's runs", "worker", w.Key().String(), "error", err)
		} else if n > 0 {
			h.Logger.Info("resolved a removed worker's runs exception/worker-shutdown", "worker", w.Key().String(), "runs", n)
		}
	}
}

// announceRemoved publishes the worker's removal.
func (h *handlers) announceRemoved(c *api.Call, w *workermanager.Worker, reason string) {
	h.publish(c, exchangeWorkerRemoved, workerMessage(w, reason, c.Now))
	if w.State == workermanager.StateStopped {
		h.publish(c, exchangeWorkerStopped, workerMessage(w, "", c.Now))
	}
}

func (h *handlers) worker(c *api.Call) (any, error) {
	_, w, err := h.authorizedWorker(c)
	if err != nil {
		return nil, err
	}
	return workerOut(w), nil
}

func (h *handlers) listPoolWorkers(c *api.Call, f store.PoolWorkerFilter) (any, error) {
	ws, next, err := h.Store.ListPoolWorkers(c.Context(), f, c.Page())
	if err != nil {
		return nil, err
	}
	out := make([]workerJSON, len(ws))
	for i := range ws {
		out[i] = workerOut(&ws[i])
	}
	return struct {
		Workers           []workerJSON `json:"workers"`
		ContinuationToken string       `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (h *handlers) listWorkersForWorkerGroup(c *api.Call) (any, error) {
	group := c.Params["workerGroup"]
	id, err := authorizedPool(c, "workerGroup", group)
	if err != nil {
		return nil, err
	}
	return h.listPoolWorkers(c, store.PoolWorkerFilter{WorkerPoolID: id, WorkerGroup: group})
}

func (h *handlers) listWorkersForWorkerPool(c *api.Call) (any, error) {
	id, err := authorizedPool(c)
	if err != nil {
		return nil, err
	}
	q := c.R.URL.Query()
	f := store.PoolWorkerFilter{WorkerPoolID: id, State: workermanager.State(q.Get("state")), LaunchConfigID: q.Get("launchConfigId")}
	if f.State != "" && !statePattern.MatchString(string(f.State)) {
		return nil, api.InvalidQuery("state", string(f.State), statePattern)
	}
	if f.LaunchConfigID != "" && !launchConfigPattern.MatchString(f.LaunchConfigID) {
		return nil, api.InvalidQuery("launchConfigId", f.LaunchConfigID, launchConfigPattern)
	}
	if _, err := h.Store.GetWorkerPool(c.Context(), id); errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker Pool does not exist")
	} else if err != nil {
		return nil, err
	}
	if f.State == "standalone" {
		// Workers worker-manager does not manage are the queue's alone.
		return map[string]any{"workers": []any{}}, nil
	}
	return h.listPoolWorkers(c, f)
}

// queueWorkerJSON is a queue worker with its pool state
// (list-workers-response.json's entries).
type queueWorkerJSON struct {
	WorkerGroup     string            `json:"workerGroup"`
	WorkerID        string            `json:"workerId"`
	WorkerPoolID    string            `json:"workerPoolId"`
	FirstClaim      *queue.Time       `json:"firstClaim,omitempty"`
	LastDateActive  *queue.Time       `json:"lastDateActive,omitempty"`
	State           string            `json:"state"`
	Capacity        int               `json:"capacity"`
	ProviderID      string            `json:"providerId"`
	LaunchConfigID  string            `json:"launchConfigId,omitempty"`
	QuarantineUntil *queue.Time       `json:"quarantineUntil,omitempty"`
	LatestTask      *store.RecentTask `json:"latestTask,omitempty"`
}

func optTime(t queue.Time) *queue.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// poolState is the worker-manager side of a queue worker: its state,
// capacity and provider, or "standalone" when no pool knows it.
func (h *handlers) poolState(c *api.Call, key store.WorkerKey) (state string, capacity int, providerID, launchConfig string, err error) {
	w, err := h.Store.GetPoolWorker(c.Context(), workermanager.Key{WorkerPoolID: key.TaskQueueID, WorkerGroup: key.WorkerGroup, WorkerID: key.WorkerID})
	if errors.Is(err, store.ErrNotFound) {
		return "standalone", 0, "none", "", nil
	}
	if err != nil {
		return "", 0, "", "", err
	}
	return string(w.State), w.Capacity, w.ProviderID, w.LaunchConfigID, nil
}

// standaloneCapacity is the capacity of a worker no pool knows: the most
// tasks the queue saw it ask for at once (0 when it never asked), where
// a pool's worker has the capacity the pool gave it.
func standaloneCapacity(state string, poolCapacity int, w *store.Worker) int {
	if state == "standalone" {
		return w.Capacity
	}
	return poolCapacity
}

// listWorkers lists the queue's workers of a task queue with their pool
// state, as Taskcluster's worker-manager joins the two.
func (h *handlers) listWorkers(c *api.Call) (any, error) {
	q := c.R.URL.Query()
	var quarantined *bool
	if v := q.Get("quarantined"); v != "" {
		b := v == "true"
		quarantined = &b
	}
	stateFilter := q.Get("workerState")
	if stateFilter != "" && !workerStatePattern.MatchString(stateFilter) {
		return nil, api.InvalidQuery("workerState", stateFilter, workerStatePattern)
	}
	if v := q.Get("launchConfigId"); v != "" && !launchConfigPattern.MatchString(v) {
		return nil, api.InvalidQuery("launchConfigId", v, launchConfigPattern)
	}
	poolID := c.Params["provisionerId"] + "/" + c.Params["workerType"]
	ws, next, err := h.Queue.ListWorkers(c.Context(), c.Now, store.WorkerFilter{TaskQueueID: poolID, Quarantined: quarantined}, c.Page())
	if err != nil {
		return nil, err
	}
	out := make([]queueWorkerJSON, 0, len(ws))
	for _, w := range ws {
		state, capacity, provider, lc, err := h.poolState(c, w.WorkerKey)
		if err != nil {
			return nil, err
		}
		capacity = standaloneCapacity(state, capacity, &w)
		if stateFilter != "" && state != stateFilter {
			continue
		}
		if v := q.Get("launchConfigId"); v != "" && lc != v {
			continue
		}
		e := queueWorkerJSON{WorkerGroup: w.WorkerGroup, WorkerID: w.WorkerID, WorkerPoolID: poolID,
			FirstClaim: optTime(queue.NewTime(w.FirstClaim)), LastDateActive: optTime(queue.NewTime(w.LastDateActive)),
			State: state, Capacity: capacity, ProviderID: provider, LaunchConfigID: lc}
		if w.QuarantineUntil.After(c.Now) {
			e.QuarantineUntil = optTime(queue.NewTime(w.QuarantineUntil))
		}
		if n := len(w.RecentTasks); n > 0 {
			e.LatestTask = &w.RecentTasks[n-1]
		}
		out = append(out, e)
	}
	return struct {
		Workers           []queueWorkerJSON `json:"workers"`
		ContinuationToken string            `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (h *handlers) getWorker(c *api.Call) (any, error) {
	p, wt := c.Params["provisionerId"], c.Params["workerType"]
	key := store.WorkerKey{TaskQueueID: p + "/" + wt, WorkerGroup: c.Params["workerGroup"], WorkerID: c.Params["workerId"]}
	w, err := h.Queue.GetWorker(c.Context(), key, c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker with workerId `%s`, workerGroup `%s`,worker-type `%s` and provisioner `%s` not found. Are you sure it was created?",
			key.WorkerID, key.WorkerGroup, wt, p)
	}
	if err != nil {
		return nil, err
	}
	state, capacity, provider, lc, err := h.poolState(c, key)
	if err != nil {
		return nil, err
	}
	capacity = standaloneCapacity(state, capacity, w)
	recent := w.RecentTasks
	if recent == nil {
		recent = []store.RecentTask{}
	}
	details := w.QuarantineDetails
	out := map[string]any{
		"provisionerId": p, "workerType": wt, "workerPoolId": key.TaskQueueID, "workerGroup": key.WorkerGroup, "workerId": key.WorkerID,
		"recentTasks": recent, "expires": queue.NewTime(w.Expires), "firstClaim": queue.NewTime(w.FirstClaim),
		"state": state, "capacity": capacity, "providerId": provider,
	}
	if !w.LastDateActive.IsZero() {
		out["lastDateActive"] = queue.NewTime(w.LastDateActive)
	}
	if !w.QuarantineUntil.IsZero() {
		out["quarantineUntil"] = queue.NewTime(w.QuarantineUntil)
	}
	if len(details) > 0 {
		out["quarantineDetails"] = details
	}
	if lc != "" {
		out["launchConfigId"] = lc
	}
	return out, nil
}

// refusal turns a rules refusal into an InputError.
func refusal(err error) error {
	var r *workermanager.Error
	if errors.As(err, &r) {
		return inputError("%s", r.Message)
	}
	return err
}

// shouldWorkerTerminate tells a worker whether it should stop: once it
// has expired, or, removed, once it holds nothing it may still be working
// on (workermanager.Worker.ShouldTerminate). Taskcluster added the method
// after the v87 clients; a registered worker's credentials carry its
// scope.
func (h *handlers) shouldWorkerTerminate(c *api.Call) (any, error) {
	_, w, err := h.authorizedWorker(c)
	if err != nil {
		return nil, err
	}
	var holds []workermanager.RunHold
	if w.Removed() {
		if holds, err = h.runHolds(c, w); err != nil {
			return nil, err
		}
	}
	terminate, reason := w.ShouldTerminate(holds, c.Now)
	return map[string]any{"terminate": terminate, "reason": reason}, nil
}

// runHolds lists the runs a removed worker holds in the queue and those
// of its recent tasks that its removal resolved (exception/worker-shutdown
// under its name) with the claim they had then.
func (h *handlers) runHolds(c *api.Call, w *workermanager.Worker) ([]workermanager.RunHold, error) {
	ctx := c.Context()
	key := store.WorkerKey{TaskQueueID: w.WorkerPoolID, WorkerGroup: w.WorkerGroup, WorkerID: w.WorkerID}
	held, err := h.Queue.ListHeldRuns(ctx, store.HeldRunsQuery{Worker: &key}, c.Now)
	if err != nil {
		return nil, err
	}
	var holds []workermanager.RunHold
	for _, r := range held {
		holds = append(holds, workermanager.RunHold{TaskID: r.TaskID, RunID: r.RunID, Running: true, TakenUntil: r.TakenUntil})
	}
	qw, err := h.Queue.GetWorker(ctx, key, c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return holds, nil
	}
	if err != nil {
		return nil, err
	}
	for _, rt := range qw.RecentTasks {
		t, err := h.Queue.GetTask(ctx, rt.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if rt.RunID >= len(t.Runs) {
			continue
		}
		r := t.Runs[rt.RunID]
		if r.WorkerGroup != w.WorkerGroup || r.WorkerID != w.WorkerID || r.TakenUntil == nil ||
			r.State != queue.StateException || r.ReasonResolved != queue.ReasonWorkerShutdown {
			continue
		}
		holds = append(holds, workermanager.RunHold{TaskID: rt.TaskID, RunID: rt.RunID, TakenUntil: r.TakenUntil.Time})
	}
	return holds, nil
}
