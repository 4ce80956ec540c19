package tcclienttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// issueCredentialsLocked creates the temporary task credentials for a claim.
func (s *Server) issueCredentialsLocked(t *task, runID int, takenUntil time.Time) tcclient.Credentials {
	run := t.status.Runs[runID]
	id := fmt.Sprintf("task-client/%s/%d/on/%s/%s/until/%d", t.status.TaskID, runID,
		run.WorkerGroup, run.WorkerID, takenUntil.Unix())
	scopes := append([]string{
		fmt.Sprintf("queue:reclaim-task:%s/%d", t.status.TaskID, runID),
		fmt.Sprintf("queue:resolve-task:%s/%d", t.status.TaskID, runID),
		fmt.Sprintf("queue:create-artifact:%s/%d", t.status.TaskID, runID),
	}, t.def.Scopes...)
	tok := randomToken()
	// The fake accepts the credentials a little beyond takenUntil, like the
	// real queue's auth tolerates clock skew.
	s.clients[id] = &client{token: tok, scopes: scopes, expires: takenUntil.Add(time.Minute)}
	cert, _ := json.Marshal(map[string]any{
		"version": 1, "scopes": scopes, "start": time.Now().UnixMilli(), "expiry": takenUntil.UnixMilli(),
		"seed": randomToken(), "signature": "fake", "issuer": "static/taskcluster/queue",
	})
	return tcclient.Credentials{ClientID: id, AccessToken: tok, Certificate: string(cert)}
}

func (s *Server) claimLocked(t *task, runID int, workerGroup, workerID string) tcclient.TaskClaim {
	now := time.Now()
	takenUntil := tcclient.NewTime(now.Add(s.opts.ClaimTimeout))
	run := &t.status.Runs[runID]
	run.State = tcclient.StateRunning
	run.WorkerGroup, run.WorkerID = workerGroup, workerID
	run.TakenUntil = takenUntil
	run.Started = tcclient.NewTime(now)
	t.status.State = tcclient.StateRunning
	s.pending = slices.DeleteFunc(s.pending, func(id string) bool { return id == t.status.TaskID })
	status := t.status
	status.Runs = slices.Clone(status.Runs)
	return tcclient.TaskClaim{
		Status: status, RunID: runID, WorkerGroup: workerGroup, WorkerID: workerID,
		TakenUntil: takenUntil, Task: t.def, Credentials: s.issueCredentialsLocked(t, runID, takenUntil.Time),
	}
}

func (s *Server) claimWork(r *http.Request, c *caller, taskQueueID string, body []byte) (any, *apiError) {
	var in tcclient.ClaimWorkRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fail(400, "MalformedPayload", "%v", err)
	}
	if in.Tasks < 1 || in.Tasks > 32 {
		return nil, fail(400, "InputValidationError", "tasks must be 1..32, got %d", in.Tasks)
	}
	if in.WorkerGroup == "" || in.WorkerID == "" {
		return nil, fail(400, "InputValidationError", "workerGroup and workerId are required")
	}
	if e := requireScope(c, "queue:claim-work:"+taskQueueID); e != nil {
		return nil, e
	}
	if e := requireScope(c, "queue:worker-id:"+in.WorkerGroup+"/"+in.WorkerID); e != nil {
		return nil, e
	}
	deadline := time.NewTimer(s.opts.LongPoll)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		var claims []tcclient.TaskClaim
		for _, id := range slices.Clone(s.pending) {
			if len(claims) >= in.Tasks {
				break
			}
			t := s.tasks[id]
			last := len(t.status.Runs) - 1
			if t.status.TaskQueueID != taskQueueID || t.status.Runs[last].State != tcclient.StatePending ||
				time.Now().After(t.def.Deadline.Time) {
				continue
			}
			claims = append(claims, s.claimLocked(t, last, in.WorkerGroup, in.WorkerID))
		}
		wake := s.wake
		s.mu.Unlock()
		if len(claims) > 0 {
			return tcclient.ClaimWorkResponse{Tasks: claims}, nil
		}
		select {
		case <-wake:
		case <-deadline.C:
			return tcclient.ClaimWorkResponse{Tasks: []tcclient.TaskClaim{}}, nil
		case <-r.Context().Done():
			return tcclient.ClaimWorkResponse{Tasks: []tcclient.TaskClaim{}}, nil
		}
	}
}

func (s *Server) lookupRunLocked(taskID string, runID int) (*task, *apiError) {
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if runID < 0 || runID >= len(t.status.Runs) {
		return nil, fail(404, "ResourceNotFound", "run %d of task %s not found", runID, taskID)
	}
	return t, nil
}

func (s *Server) claimTask(c *caller, taskID string, runID int, body []byte) (any, *apiError) {
	var in tcclient.ClaimTaskRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fail(400, "MalformedPayload", "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if e := requireScope(c, "queue:claim-task:"+t.status.TaskQueueID); e != nil {
		return nil, e
	}
	if e := requireScope(c, "queue:worker-id:"+in.WorkerGroup+"/"+in.WorkerID); e != nil {
		return nil, e
	}
	if time.Now().After(t.def.Deadline.Time) {
		return nil, fail(409, "RequestConflict", "deadline passed")
	}
	if _, e := s.lookupRunLocked(taskID, runID); e != nil {
		return nil, e
	}
	if runID != len(t.status.Runs)-1 || t.status.Runs[runID].State != tcclient.StatePending {
		return nil, fail(409, "RequestConflict", "run %d is not pending", runID)
	}
	return s.claimLocked(t, runID, in.WorkerGroup, in.WorkerID), nil
}

func (s *Server) reclaimTask(c *caller, taskID string, runID int) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, e := s.lookupRunLocked(taskID, runID)
	if e != nil {
		return nil, e
	}
	if e := requireScope(c, fmt.Sprintf("queue:reclaim-task:%s/%d", taskID, runID)); e != nil {
		return nil, e
	}
	if time.Now().After(t.def.Deadline.Time) {
		return nil, fail(409, "RequestConflict", "deadline passed")
	}
	run := &t.status.Runs[runID]
	if runID != len(t.status.Runs)-1 || run.State != tcclient.StateRunning {
		return nil, fail(409, "RequestConflict", "run %d of %s is %s", runID, taskID, run.State)
	}
	takenUntil := tcclient.NewTime(time.Now().Add(s.opts.ClaimTimeout))
	run.TakenUntil = takenUntil
	status := t.status
	status.Runs = slices.Clone(status.Runs)
	return tcclient.TaskReclaim{
		Status: status, RunID: runID, WorkerGroup: run.WorkerGroup, WorkerID: run.WorkerID,
		TakenUntil: takenUntil, Credentials: s.issueCredentialsLocked(t, runID, takenUntil.Time),
	}, nil
}

var retryReasons = map[string]string{"worker-shutdown": "retry", "intermittent-task": "task-retry"}

var validReasons = []string{"worker-shutdown", "malformed-payload", "resource-unavailable",
	"internal-error", "intermittent-task", "superseded"}

func (s *Server) resolve(c *caller, taskID string, runID int, state, reason string) (any, *apiError) {
	if state == tcclient.StateException && !slices.Contains(validReasons, reason) {
		return nil, fail(400, "InputValidationError", "invalid reason %q", reason)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, e := s.lookupRunLocked(taskID, runID)
	if e != nil {
		return nil, e
	}
	if e := requireScope(c, fmt.Sprintf("queue:resolve-task:%s/%d", taskID, runID)); e != nil {
		return nil, e
	}
	run := &t.status.Runs[runID]
	if run.State == state && run.ReasonResolved == reason {
		return tcclient.StatusResponse{Status: t.statusCopy()}, nil
	}
	if run.State != tcclient.StateRunning {
		return nil, fail(409, "RequestConflict", "run %d of %s is %s/%s", runID, taskID, run.State, run.ReasonResolved)
	}
	now := tcclient.NewTime(time.Now())
	run.State, run.ReasonResolved, run.Resolved = state, reason, now
	t.resolvedAt[runID] = now.Time
	t.status.State = state
	if rc, ok := retryReasons[reason]; ok && state == tcclient.StateException && t.status.RetriesLeft > 0 {
		t.status.RetriesLeft--
		t.status.Runs = append(t.status.Runs, tcclient.Run{
			RunID: len(t.status.Runs), State: tcclient.StatePending, ReasonCreated: rc, Scheduled: now,
		})
		t.status.State = tcclient.StatePending
		s.pushPendingLocked(taskID)
	}
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}

func (s *Server) cancelLocked(t *task) {
	last := &t.status.Runs[len(t.status.Runs)-1]
	if last.State != tcclient.StatePending && last.State != tcclient.StateRunning {
		return
	}
	now := tcclient.NewTime(time.Now())
	last.State, last.ReasonResolved, last.Resolved = tcclient.StateException, "canceled", now
	t.resolvedAt[last.RunID] = now.Time
	t.status.State = tcclient.StateException
	s.pending = slices.DeleteFunc(s.pending, func(id string) bool { return id == t.status.TaskID })
}

func (s *Server) cancelTask(c *caller, taskID string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if e := requireScope(c, "queue:cancel-task:"+t.def.SchedulerID+"/"+t.def.TaskGroupID+"/"+taskID); e != nil {
		return nil, e
	}
	s.cancelLocked(t)
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}

func (s *Server) rerunTask(c *caller, taskID string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if e := requireScope(c, "queue:rerun-task:"+t.def.SchedulerID+"/"+t.def.TaskGroupID+"/"+taskID); e != nil {
		return nil, e
	}
	last := t.status.Runs[len(t.status.Runs)-1]
	if last.State == tcclient.StatePending || last.State == tcclient.StateRunning {
		return tcclient.StatusResponse{Status: t.statusCopy()}, nil
	}
	t.status.Runs = append(t.status.Runs, tcclient.Run{
		RunID: len(t.status.Runs), State: tcclient.StatePending, ReasonCreated: "rerun", Scheduled: tcclient.NewTime(time.Now()),
	})
	t.status.State = tcclient.StatePending
	s.pushPendingLocked(taskID)
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}
