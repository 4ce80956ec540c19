package queueapi

import (
	"errors"
	"sort"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func (s *Server) pendingTasks(c *api.Call) (any, error) {
	id := c.Params["taskQueueId"]
	pending, _, err := s.store.TaskQueueCounts(c.Context(), id, c.Now)
	if err != nil {
		return nil, err
	}
	p, w := splitQueue(id)
	return map[string]any{"provisionerId": p, "workerType": w, "taskQueueId": id, "pendingTasks": pending}, nil
}

func (s *Server) taskQueueCounts(c *api.Call) (any, error) {
	id := c.Params["taskQueueId"]
	pending, claimed, err := s.store.TaskQueueCounts(c.Context(), id, c.Now)
	if err != nil {
		return nil, err
	}
	p, w := splitQueue(id)
	return map[string]any{"provisionerId": p, "workerType": w, "taskQueueId": id, "pendingTasks": pending, "claimedTasks": claimed}, nil
}

func (s *Server) listPendingTasks(c *api.Call) (any, error) {
	entries, next, err := s.store.ListPending(c.Context(), c.Params["taskQueueId"], c.Now, c.Page())
	if err != nil {
		return nil, err
	}
	type entry struct {
		TaskID   string     `json:"taskId"`
		RunID    int        `json:"runId"`
		Task     queue.Task `json:"task"`
		Inserted queue.Time `json:"inserted"`
	}
	out := make([]entry, 0, len(entries))
	for _, e := range entries {
		out = append(out, entry{e.Task.TaskID, e.RunID, e.Task.Task, queue.NewTime(e.Inserted)})
	}
	return struct {
		Tasks             []entry `json:"tasks"`
		ContinuationToken string  `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (s *Server) listClaimedTasks(c *api.Call) (any, error) {
	entries, next, err := s.store.ListClaimed(c.Context(), c.Params["taskQueueId"], c.Now, c.Page())
	if err != nil {
		return nil, err
	}
	type entry struct {
		TaskID      string     `json:"taskId"`
		RunID       int        `json:"runId"`
		WorkerGroup string     `json:"workerGroup"`
		WorkerID    string     `json:"workerId"`
		Claimed     queue.Time `json:"claimed"`
		Task        queue.Task `json:"task"`
	}
	out := make([]entry, 0, len(entries))
	for _, e := range entries {
		out = append(out, entry{e.Task.TaskID, e.RunID, e.WorkerGroup, e.WorkerID, queue.NewTime(e.Claimed), e.Task.Task})
	}
	return struct {
		Tasks             []entry `json:"tasks"`
		ContinuationToken string  `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

type taskQueueJSON struct {
	TaskQueueID    string     `json:"taskQueueId"`
	Description    string     `json:"description"`
	Stability      string     `json:"stability"`
	Expires        queue.Time `json:"expires"`
	LastDateActive queue.Time `json:"lastDateActive"`
}

func taskQueueOut(q store.TaskQueue) taskQueueJSON {
	return taskQueueJSON{q.TaskQueueID, q.Description, q.Stability, queue.NewTime(q.Expires), queue.NewTime(q.LastDateActive)}
}

func (s *Server) listTaskQueues(c *api.Call) (any, error) {
	s.settleTouches(c.Context())
	qs, next, err := s.store.ListTaskQueues(c.Context(), c.Now, store.TaskQueueFilter{}, c.Page())
	if err != nil {
		return nil, err
	}
	out := make([]taskQueueJSON, 0, len(qs))
	for _, q := range qs {
		out = append(out, taskQueueOut(q))
	}
	return struct {
		TaskQueues        []taskQueueJSON `json:"taskQueues"`
		ContinuationToken string          `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (s *Server) loadTaskQueue(c *api.Call, id string) (*store.TaskQueue, error) {
	s.settleTouches(c.Context())
	q, err := s.store.GetTaskQueue(c.Context(), id, c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("Task queue %s not found", id)
	}
	return q, err
}

func (s *Server) getTaskQueue(c *api.Call) (any, error) {
	q, err := s.loadTaskQueue(c, c.Params["taskQueueId"])
	if err != nil {
		return nil, err
	}
	return taskQueueOut(*q), nil
}

// The provisioner, worker-type and worker views are deprecated projections
// of task queues and workers, kept for older consumers (docs/contract/queue.md §5.9).

type provisionerJSON struct {
	ProvisionerID  string     `json:"provisionerId"`
	Description    string     `json:"description"`
	Stability      string     `json:"stability"`
	Expires        queue.Time `json:"expires"`
	LastDateActive queue.Time `json:"lastDateActive"`
	Actions        []any      `json:"actions"`
}

// provisioners folds every non-expired task queue into provisioners.
func (s *Server) provisioners(c *api.Call) ([]provisionerJSON, error) {
	byID := map[string]*provisionerJSON{}
	page := store.Page{}
	for {
		s.settleTouches(c.Context())
		qs, next, err := s.store.ListTaskQueues(c.Context(), c.Now, store.TaskQueueFilter{}, page)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			p, _ := splitQueue(q.TaskQueueID)
			cur := byID[p]
			if cur == nil {
				cur = &provisionerJSON{ProvisionerID: p, Stability: "experimental", Actions: []any{}}
				byID[p] = cur
			}
			if q.Expires.After(cur.Expires.Time) {
				cur.Expires = queue.NewTime(q.Expires)
			}
			if q.LastDateActive.After(cur.LastDateActive.Time) {
				cur.LastDateActive = queue.NewTime(q.LastDateActive)
			}
		}
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	out := make([]provisionerJSON, 0, len(byID))
	for _, p := range byID {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProvisionerID < out[j].ProvisionerID })
	return out, nil
}

func (s *Server) listProvisioners(c *api.Call) (any, error) {
	all, err := s.provisioners(c)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(all))
	for i, p := range all {
		ids[i] = p.ProvisionerID
	}
	pageIDsOut, next, err := pageIDs(ids, c.Page())
	if err != nil {
		return nil, err
	}
	out := make([]provisionerJSON, 0, len(pageIDsOut))
	for _, p := range all {
		for _, id := range pageIDsOut {
			if p.ProvisionerID == id {
				out = append(out, p)
			}
		}
	}
	return struct {
		Provisioners      []provisionerJSON `json:"provisioners"`
		ContinuationToken string            `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (s *Server) getProvisioner(c *api.Call) (any, error) {
	all, err := s.provisioners(c)
	if err != nil {
		return nil, err
	}
	for _, p := range all {
		if p.ProvisionerID == c.Params["provisionerId"] {
			return p, nil
		}
	}
	return nil, api.NotFoundf("Provisioner %s not found", c.Params["provisionerId"])
}

// bodyProperties lists the top-level keys of the validated body: the
// declare* methods need a scope per property present.
func bodyProperties(c *api.Call) ([]string, map[string]any, error) {
	var m map[string]any
	if err := c.Decode(&m); err != nil {
		return nil, nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, m, nil
}

func (s *Server) declareProvisioner(c *api.Call) (any, error) {
	props, _, err := bodyProperties(c)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"provisionerId": c.Params["provisionerId"], "properties": props}); err != nil {
		return nil, err
	}
	// As in client v87, declaring a provisioner changes nothing: it is a
	// projection of its task queues.
	return s.getProvisioner(c)
}

type workerTypeJSON struct {
	ProvisionerID  string     `json:"provisionerId"`
	WorkerType     string     `json:"workerType"`
	TaskQueueID    string     `json:"taskQueueId"`
	Description    string     `json:"description"`
	Stability      string     `json:"stability"`
	Expires        queue.Time `json:"expires"`
	LastDateActive queue.Time `json:"lastDateActive"`
	Actions        []any      `json:"actions"`
}

func workerTypeOut(q store.TaskQueue) workerTypeJSON {
	p, w := splitQueue(q.TaskQueueID)
	return workerTypeJSON{p, w, q.TaskQueueID, q.Description, q.Stability, queue.NewTime(q.Expires), queue.NewTime(q.LastDateActive), []any{}}
}

func (s *Server) listWorkerTypes(c *api.Call) (any, error) {
	s.settleTouches(c.Context())
	qs, next, err := s.store.ListTaskQueues(c.Context(), c.Now, store.TaskQueueFilter{ProvisionerID: c.Params["provisionerId"]}, c.Page())
	if err != nil {
		return nil, err
	}
	out := make([]workerTypeJSON, 0, len(qs))
	for _, q := range qs {
		out = append(out, workerTypeOut(q))
	}
	return struct {
		WorkerTypes       []workerTypeJSON `json:"workerTypes"`
		ContinuationToken string           `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (s *Server) getWorkerType(c *api.Call) (any, error) {
	q, err := s.loadTaskQueue(c, c.Params["provisionerId"]+"/"+c.Params["workerType"])
	if err != nil {
		return nil, err
	}
	return workerTypeOut(*q), nil
}

func (s *Server) declareWorkerType(c *api.Call) (any, error) {
	props, body, err := bodyProperties(c)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"provisionerId": c.Params["provisionerId"], "workerType": c.Params["workerType"], "properties": props}); err != nil {
		return nil, err
	}
	p := store.TouchTaskQueueParams{TaskQueueID: c.Params["provisionerId"] + "/" + c.Params["workerType"], Now: c.Now, Expires: c.Now.Add(5 * 24 * time.Hour)}
	if v, ok := body["description"].(string); ok {
		p.Description = &v
	}
	if v, ok := body["stability"].(string); ok {
		p.Stability = &v
	}
	if v, ok := body["expires"].(string); ok {
		if t, err := queue.ParseTime(v); err == nil {
			p.Expires = t.Time
		}
	}
	q, err := s.store.TouchTaskQueue(c.Context(), p)
	if err != nil {
		return nil, err
	}
	return workerTypeOut(*q), nil
}
