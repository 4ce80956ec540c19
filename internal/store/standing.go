package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/workermanager"
)

// A worker's standing as the queue's claims read it: whether the Worker
// Manager stopped it (removeWorker, or its scanner), so the queue refuses
// it work although its credentials last until they expire. The claims
// read it in their first round trip (ClaimWorkParams.CheckStopped,
// UpdateTaskParams.RefuseStopped) rather than asking first.

// stoppedStates are the pool worker states the queue refuses work to.
var stoppedStates = []any{string(workermanager.StateStopping), string(workermanager.StateStopped)}

// poolWorkerStoppedQuery selects a row when the worker of a pool is
// stopping or stopped; a worker no pool knows is not.
const poolWorkerStoppedQuery = `SELECT 1 FROM wm_workers WHERE worker_pool_id = ? AND worker_group = ? AND worker_id = ? AND state IN (?, ?)`

func poolWorkerStoppedArgs(key WorkerKey) []any {
	return append([]any{key.TaskQueueID, key.WorkerGroup, key.WorkerID}, stoppedStates...)
}

// poolWorkerStoppedStatement reads whether the worker is stopped into
// *stopped, in a transaction's round trip.
func poolWorkerStoppedStatement(key WorkerKey, stopped *bool) Statement {
	return Statement{
		Query: poolWorkerStoppedQuery,
		Args:  poolWorkerStoppedArgs(key),
		What:  "reading the standing of worker " + key.WorkerGroup + "/" + key.WorkerID,
		Rows: func(rows Rows) error {
			var one int
			err := scanOne(rows, &one)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			*stopped = err == nil
			return err
		},
	}
}

// poolWorkerStopped is the same question on its own, for a claim that
// asks the database nothing else: one statement, no transaction.
func (db *DB) poolWorkerStopped(ctx context.Context, key WorkerKey) (bool, error) {
	var one int
	err := db.queryRow(ctx, poolWorkerStoppedQuery, poolWorkerStoppedArgs(key)...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the standing of worker %s/%s: %w", key.WorkerGroup, key.WorkerID, err)
	}
	return true, nil
}

// answersAlone reports whether a claim of the queue may be answered
// without looking at it: a claim found it drained since the last run was
// announced, or the hub holds its pending runs exactly (handover.go).
func (h *Hub) answersAlone(taskQueueID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[taskQueueID]
	return q != nil && (q.empty || q.exact)
}

// sendStanding queues the reads of what standing asks, in the
// transaction's next round trip: the named worker's quarantine and
// standing, or the standing of run RunID's holder.
func (t *txn) sendStanding(taskID string, now time.Time, standing *WorkerStanding) {
	standing.Stopped, standing.QuarantinedUntil = false, time.Time{}
	if standing.Worker.WorkerID != "" {
		t.send(poolWorkerStoppedStatement(standing.Worker, &standing.Stopped))
		key := standing.Worker
		t.send(Statement{Query: `SELECT quarantine_until FROM workers
			WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ? AND quarantine_until > ?`,
			Args: []any{key.TaskQueueID, key.WorkerGroup, key.WorkerID, ms(now)},
			What: "reading the quarantine of worker " + key.WorkerGroup + "/" + key.WorkerID,
			Rows: func(rows Rows) error {
				var until int64
				err := scanOne(rows, &until)
				if errors.Is(err, sql.ErrNoRows) {
					return nil
				}
				if err == nil {
					standing.QuarantinedUntil = fromMS(until)
				}
				return err
			}})
		return
	}
	field := t.db.dialect.RunField
	t.send(Statement{Query: `SELECT 1 FROM tasks JOIN wm_workers ON wm_workers.worker_pool_id = tasks.task_queue_id
			AND wm_workers.worker_group = ` + field("?", "workerGroup") + ` AND wm_workers.worker_id = ` + field("?", "workerId") + `
		WHERE tasks.task_id = ? AND wm_workers.state IN (?, ?)`,
		Args: append([]any{standing.RunID, standing.RunID, taskID}, stoppedStates...),
		What: fmt.Sprintf("reading the standing of the holder of run %d of %s", standing.RunID, taskID),
		Rows: func(rows Rows) error {
			var one int
			err := scanOne(rows, &one)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			standing.Stopped = err == nil
			return err
		}})
}
