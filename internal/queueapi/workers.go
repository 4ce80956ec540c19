package queueapi

import (
	"context"
	"errors"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// The queue's views of workers (listWorkers, getWorker) and the calls
// that change a worker's record (quarantineWorker, declareWorker).

// workerJSON is Taskcluster's worker-response, with hopper's additions
// (docs/history.md, "Workers"): online, capacity, busy and runningTasks.
type workerJSON struct {
	ProvisionerID   string             `json:"provisionerId"`
	WorkerType      string             `json:"workerType"`
	TaskQueueID     string             `json:"taskQueueId"`
	WorkerGroup     string             `json:"workerGroup"`
	WorkerID        string             `json:"workerId"`
	RecentTasks     []store.RecentTask `json:"recentTasks"`
	Expires         queue.Time         `json:"expires"`
	FirstClaim      queue.Time         `json:"firstClaim"`
	QuarantineUntil queue.Time         `json:"quarantineUntil"`
	LastDateActive  *queue.Time        `json:"lastDateActive,omitempty"`
	Actions         []any              `json:"actions"`
	workerLoadJSON
	RunningTasks []runningTaskJSON `json:"runningTasks"`
}

// workerLoadJSON is queue.WorkerLoad in a reply.
type workerLoadJSON struct {
	Online   bool `json:"online"`
	Capacity int  `json:"capacity"`
	Busy     int  `json:"busy"`
}

// runningTaskJSON is a run a worker holds now.
type runningTaskJSON struct {
	TaskID     string     `json:"taskId"`
	RunID      int        `json:"runId"`
	Started    queue.Time `json:"started"`
	TakenUntil queue.Time `json:"takenUntil"`
}

// workerOut is a worker's reply, with the runs it holds now.
func (s *Server) workerOut(ctx context.Context, w *store.Worker, now time.Time) (workerJSON, error) {
	held, err := s.store.ListHeldRuns(ctx, store.HeldRunsQuery{Worker: &w.WorkerKey}, now)
	if err != nil {
		return workerJSON{}, err
	}
	p, wt := splitQueue(w.TaskQueueID)
	active := queue.NewTime(w.LastDateActive)
	recent := w.RecentTasks
	if recent == nil {
		recent = []store.RecentTask{}
	}
	running := make([]runningTaskJSON, len(held))
	for i, r := range held {
		running[i] = runningTaskJSON{r.TaskID, r.RunID, queue.NewTime(r.Started), queue.NewTime(r.TakenUntil)}
	}
	return workerJSON{p, wt, w.TaskQueueID, w.WorkerGroup, w.WorkerID, recent, queue.NewTime(w.Expires),
		queue.NewTime(w.FirstClaim), queue.NewTime(w.QuarantineUntil), &active, []any{},
		loadOut(s.live.load(w, len(held), now)), running}, nil
}

func loadOut(l queue.WorkerLoad) workerLoadJSON { return workerLoadJSON{l.Online, l.Capacity, l.Busy} }

func (s *Server) listWorkers(c *api.Call) (any, error) {
	var quarantined *bool
	if v := c.R.URL.Query().Get("quarantined"); v != "" {
		b := v == "true"
		quarantined = &b
	}
	s.settleTouches(c.Context())
	taskQueueID := c.Params["provisionerId"] + "/" + c.Params["workerType"]
	ws, next, err := s.store.ListWorkers(c.Context(), c.Now, store.WorkerFilter{TaskQueueID: taskQueueID, Quarantined: quarantined}, c.Page())
	if err != nil {
		return nil, err
	}
	runs, err := s.store.ListHeldRuns(c.Context(), store.HeldRunsQuery{TaskQueueID: taskQueueID}, c.Now)
	if err != nil {
		return nil, err
	}
	held := heldBy(runs)
	type entry struct {
		WorkerGroup     string            `json:"workerGroup"`
		WorkerID        string            `json:"workerId"`
		FirstClaim      queue.Time        `json:"firstClaim"`
		LastDateActive  queue.Time        `json:"lastDateActive"`
		LatestTask      *store.RecentTask `json:"latestTask,omitempty"`
		QuarantineUntil *queue.Time       `json:"quarantineUntil,omitempty"`
		// State and ProviderID are the worker's in its worker pool, as
		// Taskcluster's worker-manager joins them.
		State      string `json:"state,omitempty"`
		ProviderID string `json:"providerId,omitempty"`
		workerLoadJSON
	}
	out := make([]entry, 0, len(ws))
	for _, w := range ws {
		e := entry{WorkerGroup: w.WorkerGroup, WorkerID: w.WorkerID, FirstClaim: queue.NewTime(w.FirstClaim), LastDateActive: queue.NewTime(w.LastDateActive),
			workerLoadJSON: loadOut(s.live.load(&w, len(held[w.WorkerKey]), c.Now))}
		if s.poolState != nil {
			if e.State, e.ProviderID, err = s.poolState(c.Context(), w.WorkerKey); err != nil {
				return nil, err
			}
		}
		if n := len(w.RecentTasks); n > 0 {
			e.LatestTask = &w.RecentTasks[n-1]
		}
		if w.QuarantineUntil.After(c.Now) {
			q := queue.NewTime(w.QuarantineUntil)
			e.QuarantineUntil = &q
		}
		out = append(out, e)
	}
	return struct {
		Workers           []entry `json:"workers"`
		ContinuationToken string  `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func workerKeyOf(c *api.Call) store.WorkerKey {
	return store.WorkerKey{TaskQueueID: c.Params["provisionerId"] + "/" + c.Params["workerType"], WorkerGroup: c.Params["workerGroup"], WorkerID: c.Params["workerId"]}
}

func (s *Server) getWorker(c *api.Call) (any, error) {
	key := workerKeyOf(c)
	if _, err := s.loadTaskQueue(c, key.TaskQueueID); err != nil {
		return nil, err
	}
	s.settleTouches(c.Context())
	w, err := s.store.GetWorker(c.Context(), key, c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("Worker %s/%s not found", key.WorkerGroup, key.WorkerID)
	}
	if err != nil {
		return nil, err
	}
	return s.workerOut(c.Context(), w, c.Now)
}

func (s *Server) quarantineWorker(c *api.Call) (any, error) {
	var in struct {
		QuarantineUntil queue.Time `json:"quarantineUntil"`
		QuarantineInfo  string     `json:"quarantineInfo"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if in.QuarantineInfo == "" {
		in.QuarantineInfo = "[unspecified]"
	}
	clientID := c.CallerClientID()
	s.settleTouches(c.Context())
	w, err := s.store.QuarantineWorker(c.Context(), store.QuarantineWorkerParams{
		Key: workerKeyOf(c), Now: c.Now, QuarantineUntil: in.QuarantineUntil.Time,
		Detail: store.QuarantineDetail{ClientID: clientID, UpdatedAt: queue.NewTime(c.Now).String(), QuarantineUntil: in.QuarantineUntil.String(), QuarantineInfo: in.QuarantineInfo},
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("Worker %s/%s not found", c.Params["workerGroup"], c.Params["workerId"])
	}
	if err != nil {
		return nil, err
	}
	return s.workerOut(c.Context(), w, c.Now)
}

func (s *Server) declareWorker(c *api.Call) (any, error) {
	props, body, err := bodyProperties(c)
	if err != nil {
		return nil, err
	}
	key := workerKeyOf(c)
	if err := c.Authorize(c.Route.Scopes, map[string]any{"provisionerId": c.Params["provisionerId"], "workerType": c.Params["workerType"],
		"workerGroup": key.WorkerGroup, "workerId": key.WorkerID, "properties": props}); err != nil {
		return nil, err
	}
	expires := c.Now.Add(workerRecordLifetime)
	if v, ok := body["expires"].(string); ok {
		if t, err := queue.ParseTime(v); err == nil {
			expires = t.Time
		}
	}
	if _, err := s.store.TouchTaskQueue(c.Context(), store.TouchTaskQueueParams{TaskQueueID: key.TaskQueueID, Now: c.Now, Expires: expires}); err != nil {
		return nil, err
	}
	w, err := s.store.TouchWorker(c.Context(), store.TouchWorkerParams{Key: key, Now: c.Now, Expires: expires})
	if err != nil {
		return nil, err
	}
	return s.workerOut(c.Context(), w, c.Now)
}
