package queueapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Bookkeeping lifetimes (docs/contract/queue.md §6.7).
const (
	workerRecordLifetime      = 24 * time.Hour
	taskQueueRecordLifetime   = 24 * time.Hour
	claimTaskQueueRecordExtra = 5 * 24 * time.Hour
)

type claimResponse struct {
	Status      queue.Status    `json:"status"`
	RunID       int             `json:"runId"`
	WorkerGroup string          `json:"workerGroup"`
	WorkerID    string          `json:"workerId"`
	TakenUntil  queue.Time      `json:"takenUntil"`
	Task        json.RawMessage `json:"task,omitempty"`
	Credentials Credentials     `json:"credentials"`
}

// claimFor builds the reply for a held run, with fresh credentials.
func (s *Server) claimFor(t *queue.TaskState, runID int, now time.Time, withTask bool) (*claimResponse, error) {
	r := t.Runs[runID]
	if r.TakenUntil == nil {
		return nil, fmt.Errorf("run %d of %s has no takenUntil", runID, t.TaskID)
	}
	creds, err := s.creds.TaskCredentials(t.TaskID, runID, r.WorkerGroup, r.WorkerID, now, r.TakenUntil.Time, t.Task.Scopes)
	if err != nil {
		return nil, fmt.Errorf("issuing credentials for %s/%d: %w", t.TaskID, runID, err)
	}
	out := &claimResponse{Status: t.Status(), RunID: runID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID,
		TakenUntil: *r.TakenUntil, Credentials: creds}
	if withTask {
		def, err := t.DefinitionBytes()
		if err != nil {
			return nil, fmt.Errorf("encoding the definition of %s: %w", t.TaskID, err)
		}
		out.Task = def
	}
	return out, nil
}

// takenUntil is when a claim or reclaim made at now runs out.
func (s *Server) takenUntil(now time.Time) time.Time { return now.Add(s.cfg.ClaimTimeout) }

// touchInterval bounds how often one process rewrites the bookkeeping
// records of a worker and its task queue: every claimWork would otherwise
// cost two extra commits (Taskcluster writes them at most every 30 min).
const touchInterval = time.Minute

type workerIdentity struct {
	WorkerGroup string `json:"workerGroup"`
	WorkerID    string `json:"workerId"`
}

func (s *Server) claimWork(c *api.Call) (any, error) {
	var in struct {
		workerIdentity
		Tasks int `json:"tasks"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	taskQueueID := c.Params["taskQueueId"]
	if err := c.Authorize(c.Route.Scopes, map[string]any{"taskQueueId": taskQueueID, "workerGroup": in.WorkerGroup, "workerId": in.WorkerID}); err != nil {
		return nil, err
	}
	if in.Tasks < 1 {
		in.Tasks = 1
	}
	ctx := c.Context()
	key := store.WorkerKey{TaskQueueID: taskQueueID, WorkerGroup: in.WorkerGroup, WorkerID: in.WorkerID}
	started := time.Now()
	wait := s.longPollFor()
	deadline := started.Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// Subscribe before the first attempt so a task made pending between the
	// attempt and the wait is not missed. While the hub knows the queue is
	// empty an attempt asks nothing of the database, so a waiting call
	// costs no query and no connection; the hub's backup timer, one per
	// queue, covers a lost wake-up (store.Hub). While the call waits, a
	// create in this process may claim its new task for the call
	// (store/direct.go).
	claimant := &store.Claimant{WorkerGroup: in.WorkerGroup, WorkerID: in.WorkerID, ClaimTimeout: s.cfg.ClaimTimeout,
		Alive: func() bool { return ctx.Err() == nil }}
	waiting := s.hub.WaitForWork(taskQueueID, in.Tasks, claimant, nil)
	defer s.leaveWaiting(waiting, key)
	params := store.ClaimWorkParams{
		TaskQueueID: taskQueueID, WorkerGroup: in.WorkerGroup, WorkerID: in.WorkerID,
		// The worker's recent tasks go with its touches, in batches
		// (touches.go), not in the claim's transaction.
		Count: in.Tasks, CheckQuarantine: true, SkipKnownEmpty: true,
		// A worker its pool's manager stopped is refused in the first
		// attempt's round trip, not by a look of its own before it.
		CheckStopped: s.refuseStopped,
	}
	for first := true; ; first = false {
		now := s.clock.Now()
		res := waiting.Claimed()
		if res == nil {
			params.Now, params.TakenUntil = now, s.takenUntil(now)
			// Every attempt after the first follows a wake-up.
			params.Woken = !first
			var err error
			if res, err = s.store.ClaimWork(ctx, params); err != nil {
				return nil, err
			}
		}
		if first {
			if res.WorkerStopped {
				return nil, refusal(key)
			}
			// Seen once it is known not refused.
			s.touchWorker(key, c.Now, in.Tasks)
			params.CheckStopped = false
		}
		if !res.QuarantinedUntil.IsZero() {
			// A quarantined worker waits out the long-poll and gets nothing;
			// leaving the hub now hands on a wake-up meant for others.
			waiting.Leave()
			select {
			case <-timer.C:
			case <-ctx.Done():
			case <-s.draining:
			}
			return emptyClaim{}, nil
		}
		if len(res.Claims) > 0 {
			s.recordRecentTasks(key, res)
			return s.claimReply(ctx, res, now)
		}
		if first && s.parkClaim(c, params, started, deadline, waiting) {
			// Nothing yet: the call waits parked, without this goroutine
			// (park.go).
			return api.ParkedReply{}, nil
		}
		waiting.Arm()
		select {
		case <-waiting.C:
			continue
		case <-timer.C:
		case <-ctx.Done():
		case <-s.draining:
		}
		// Runs claimed for the call as it stopped waiting are its answer.
		if res := waiting.Leave(); res != nil && ctx.Err() == nil {
			s.recordRecentTasks(key, res)
			return s.claimReply(ctx, res, s.clock.Now())
		} else if res != nil {
			s.lostClaims(key, res)
		}
		return emptyClaim{}, nil
	}
}

// leaveWaiting ends a claimWork call's wait in the hub when its handler
// returns. Runs claimed for it after its answer was settled cannot be
// answered any more: they are logged, and expire with their claims.
func (s *Server) leaveWaiting(waiting *store.Waiting, key store.WorkerKey) {
	if res := waiting.Leave(); res != nil {
		s.lostClaims(key, res)
	}
}

// lostClaims logs runs claimed for a claimWork call that could not be
// answered with them (the worker went away as they were claimed). Like a
// reply lost on its way, they end when their claims expire
// (claim-expired), and are retried.
func (s *Server) lostClaims(key store.WorkerKey, res *store.ClaimResult) {
	for _, cl := range res.Claims {
		s.log.Warn("claimWork: a run claimed for a worker that left before its answer; it is retried once its claim expires",
			"taskId", cl.Task.TaskID, "runId", cl.RunID, "taskQueueId", key.TaskQueueID,
			"workerGroup", key.WorkerGroup, "workerId", key.WorkerID)
	}
}

// claimReply publishes the claims' events, writes the superseding
// artifacts of claims that superseded older tasks and builds claimWork's
// reply.
func (s *Server) claimReply(ctx context.Context, res *store.ClaimResult, now time.Time) (any, error) {
	s.publish(ctx, res.Changes)
	s.writeSupersessions(ctx, res.Supersessions, now)
	claims := make([]*claimResponse, 0, len(res.Claims))
	for _, cl := range res.Claims {
		cr, err := s.claimFor(cl.Task, cl.RunID, now, true)
		if err != nil {
			return nil, err
		}
		claims = append(claims, cr)
	}
	return map[string]any{"tasks": claims}, nil
}

// emptyClaim is claimWork's reply when no task came: {"tasks": []}.
type emptyClaim struct {
	Tasks [0]struct{} `json:"tasks"`
}

func (s *Server) claimTask(c *api.Call) (any, error) {
	var in workerIdentity
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	ctx := c.Context()
	t, err := s.loadTask(ctx, c.Params["taskId"])
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{
		"provisionerId": t.Task.ProvisionerID, "workerType": t.Task.WorkerType,
		"workerGroup": in.WorkerGroup, "workerId": in.WorkerID,
	}); err != nil {
		return nil, err
	}
	if !t.Task.Deadline.After(c.Now) {
		return nil, queue.Conflictf("Task %s can't be claimed past its deadline of %s", t.TaskID, t.Task.Deadline)
	}
	if p := t.Task.Flow; p.Keyed() && (p.Limit > 0 || p.Supersede) {
		// Only claimWork keeps a key within its limit and supersedes in
		// the claim's transaction.
		return nil, queue.Conflictf("Task %s is under the flow control of key %q (limit or supersede): only claimWork hands it out", t.TaskID, p.Key)
	}
	key := store.WorkerKey{TaskQueueID: t.Task.TaskQueueID, WorkerGroup: in.WorkerGroup, WorkerID: in.WorkerID}
	runID := c.IntParam("runId")
	// The worker's standing is read with the task's lock, in one round
	// trip: a worker its manager stopped is refused, and a quarantined one
	// too, with 409 (Taskcluster answers an invalid empty claim there,
	// which surfaces as a 500).
	standing := &store.WorkerStanding{Worker: key}
	res, err := s.store.UpdateTask(ctx, store.UpdateTaskParams{TaskID: t.TaskID, Now: c.Now, Standing: standing,
		Apply: func(t *queue.TaskState, tr *queue.Transition) error {
			if standing.Stopped && s.refuseStopped {
				return refusal(key)
			}
			if standing.QuarantinedUntil.After(c.Now) {
				return queue.Conflictf("Worker %s/%s is quarantined until %s", in.WorkerGroup, in.WorkerID, queue.NewTime(standing.QuarantinedUntil))
			}
			return t.Claim(runID, in.WorkerGroup, in.WorkerID, c.Now, s.takenUntil(c.Now), tr)
		}})
	if err != nil {
		return nil, err
	}
	if !madeChanges(res) {
		// The worker repeated a claim it holds (its first answer was
		// lost): the same run again, with fresh credentials, and nothing
		// recorded twice.
		return s.claimFor(res.Task, runID, c.Now, true)
	}
	s.publish(ctx, res.Changes)
	if _, err := s.store.TouchTaskQueue(ctx, store.TouchTaskQueueParams{TaskQueueID: t.Task.TaskQueueID, Now: c.Now, Expires: c.Now.Add(claimTaskQueueRecordExtra)}); err != nil {
		s.log.Warn("recording task queue", "error", err)
	}
	s.settleTouches(ctx) // a worker first seen by a claimWork moments ago has its record
	if err := s.store.AddRecentTasks(ctx, key, []store.RecentTask{{TaskID: t.TaskID, RunID: runID}}); err != nil {
		s.log.Warn("recording recent tasks", "error", err)
	}
	return s.claimFor(res.Task, runID, c.Now, true)
}

// madeChanges reports whether an update emitted any event.
func madeChanges(res *store.Result) bool {
	for _, ch := range res.Changes {
		if len(ch.Events) > 0 {
			return true
		}
	}
	return false
}

// runCall serves the methods addressed to one run: 404 for an unknown task
// or run, then the transition.
func (s *Server) runCall(c *api.Call, apply func(*queue.TaskState, *queue.Transition, int) error) (*store.Result, error) {
	return s.runCallStanding(c, nil, apply)
}

// runCallStanding is runCall reading a worker's standing with the task
// (store.UpdateTaskParams.Standing).
func (s *Server) runCallStanding(c *api.Call, standing *store.WorkerStanding, apply func(*queue.TaskState, *queue.Transition, int) error) (*store.Result, error) {
	taskID, runID := c.Params["taskId"], c.IntParam("runId")
	res, err := s.store.UpdateTask(c.Context(), store.UpdateTaskParams{TaskID: taskID, Now: c.Now, Standing: standing, Apply: func(t *queue.TaskState, tr *queue.Transition) error {
		if runID >= len(t.Runs) {
			return queue.NotFoundf("Run %d not found on task %s", runID, taskID)
		}
		return apply(t, tr, runID)
	}})
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("Task `%s` not found", taskID)
	}
	if err != nil {
		return nil, err
	}
	s.publish(c.Context(), res.Changes)
	return res, nil
}

func (s *Server) reclaimTask(c *api.Call) (any, error) {
	// Whether the run's holder was stopped by its pool's manager is read
	// with the task's lock. Removal resolves the worker's runs, so this is
	// for a run that slipped past that (a claim that landed as the worker
	// was removed), until the worker scanner resolves it.
	var standing *store.WorkerStanding
	if s.refuseStopped {
		standing = &store.WorkerStanding{RunID: c.IntParam("runId")}
	}
	res, err := s.runCallStanding(c, standing, func(t *queue.TaskState, _ *queue.Transition, runID int) error {
		if r := t.Runs[runID]; standing != nil && standing.Stopped && r.State == queue.StateRunning {
			return refusal(store.WorkerKey{TaskQueueID: t.Task.TaskQueueID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID})
		}
		return t.Reclaim(runID, c.Now, s.takenUntil(c.Now))
	})
	if err != nil {
		return nil, err
	}
	// A reclaim is the heartbeat of a worker whose slots are all busy: it
	// asks for no work, so without this its record would say it was last
	// seen when it last asked.
	runID := c.IntParam("runId")
	r := res.Task.Runs[runID]
	s.touchWorker(store.WorkerKey{TaskQueueID: res.Task.Task.TaskQueueID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID}, c.Now, 0)
	return s.claimFor(res.Task, runID, c.Now, false)
}

func (s *Server) reportCompleted(c *api.Call) (any, error) {
	var legacy struct {
		Success *bool `json:"success"`
	}
	decodeLenient(c.Body, &legacy)
	if legacy.Success != nil && !*legacy.Success {
		return s.reportFailed(c)
	}
	res, err := s.runCall(c, func(t *queue.TaskState, tr *queue.Transition, runID int) error {
		return t.ReportCompleted(runID, c.Now, tr)
	})
	if err != nil {
		return nil, err
	}
	return statusResponse{res.Task.Status()}, nil
}

func (s *Server) reportFailed(c *api.Call) (any, error) {
	res, err := s.runCall(c, func(t *queue.TaskState, tr *queue.Transition, runID int) error {
		return t.ReportFailed(runID, c.Now, tr)
	})
	if err != nil {
		return nil, err
	}
	s.failFast(c.Context(), res.Task, c.Now)
	return statusResponse{res.Task.Status()}, nil
}

func (s *Server) reportException(c *api.Call) (any, error) {
	var in struct {
		Reason string `json:"reason"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	res, err := s.runCall(c, func(t *queue.TaskState, tr *queue.Transition, runID int) error {
		return t.ReportException(runID, in.Reason, c.Now, tr)
	})
	if err != nil {
		return nil, err
	}
	return statusResponse{res.Task.Status()}, nil
}

func splitQueue(id string) (string, string) {
	p, w, _ := strings.Cut(id, "/")
	return p, w
}
