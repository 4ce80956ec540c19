package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// LivenessStore reads what tells whether workers are online and busy
// (queue.LoadOf): when each was last seen, the most tasks it asked for,
// and the runs each holds now.
type LivenessStore interface {
	// ListWorkersSeen lists the workers of every task queue seen (claimWork,
	// reclaimTask) at or after since.
	ListWorkersSeen(ctx context.Context, since time.Time) ([]WorkerSeen, error)
	// ListHeldRuns lists the runs workers hold at now: running, their
	// claims not run out (takenUntil after now).
	ListHeldRuns(ctx context.Context, q HeldRunsQuery, now time.Time) ([]HeldRun, error)
}

// WorkerSeen is the part of a worker's record that says whether it is
// online and how many tasks it takes.
type WorkerSeen struct {
	WorkerKey
	LastDateActive time.Time
	Capacity       int
}

// HeldRunsQuery narrows ListHeldRuns: to one task queue (TaskQueueID, or
// every queue), and within it to one worker (Worker).
type HeldRunsQuery struct {
	TaskQueueID string
	// Worker, if set, keeps that worker's runs only; its TaskQueueID
	// wins over the query's.
	Worker *WorkerKey
}

// HeldRun is a run a worker holds.
type HeldRun struct {
	Worker     WorkerKey
	TaskID     string
	RunID      int
	Started    time.Time
	TakenUntil time.Time
}

// ListWorkersSeen implements LivenessStore: a scan of the workers table
// (a few columns a row), once a scrape for the metrics.
func (db *DB) ListWorkersSeen(ctx context.Context, since time.Time) ([]WorkerSeen, error) {
	rows, err := db.query(ctx, `SELECT task_queue_id, worker_group, worker_id, last_date_active, capacity
		FROM workers WHERE last_date_active >= ?`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("listing workers seen: %w", err)
	}
	defer rows.Close()
	var out []WorkerSeen
	for rows.Next() {
		var w WorkerSeen
		var active int64
		if err := rows.Scan(&w.TaskQueueID, &w.WorkerGroup, &w.WorkerID, &active, &w.Capacity); err != nil {
			return nil, fmt.Errorf("listing workers seen: %w", err)
		}
		w.LastDateActive = fromMS(active)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing workers seen: %w", err)
	}
	return out, nil
}

// ListHeldRuns implements LivenessStore. Running tasks whose claims last
// are read through the index of claims (tasks_taken_until), or of a
// queue's running tasks (tasks_running); who holds a run is in its runs'
// JSON, so for one worker a LIKE on its workerId's encoding narrows the
// rows first and Go checks the decoded run exactly. It reads what is
// running now, not the history: the number of busy slots.
func (db *DB) ListHeldRuns(ctx context.Context, q HeldRunsQuery, now time.Time) ([]HeldRun, error) {
	query := "SELECT task_id, task_queue_id, runs FROM tasks WHERE state = 'running' AND taken_until > ?"
	args := []any{ms(now)}
	queueID := q.TaskQueueID
	if q.Worker != nil {
		queueID = q.Worker.TaskQueueID
		encoded, err := json.Marshal(q.Worker.WorkerID)
		if err != nil {
			return nil, fmt.Errorf("encoding worker id: %w", err)
		}
		query += ` AND runs LIKE ? ESCAPE '\'`
		args = append(args, `%"workerId":`+likeEscape(string(encoded))+`%`)
	}
	if queueID != "" {
		query += " AND task_queue_id = ?"
		args = append(args, queueID)
	}
	rows, err := db.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing held runs: %w", err)
	}
	defer rows.Close()
	var out []HeldRun
	for rows.Next() {
		var taskID, taskQueueID, runsJSON string
		if err := rows.Scan(&taskID, &taskQueueID, &runsJSON); err != nil {
			return nil, fmt.Errorf("listing held runs: %w", err)
		}
		var runs []queue.Run
		if err := json.Unmarshal([]byte(runsJSON), &runs); err != nil {
			return nil, fmt.Errorf("decoding the runs of %s: %w", taskID, err)
		}
		if len(runs) == 0 {
			continue
		}
		r := runs[len(runs)-1]
		if r.State != queue.StateRunning || r.TakenUntil == nil || !r.TakenUntil.After(now) {
			continue
		}
		h := HeldRun{Worker: WorkerKey{TaskQueueID: taskQueueID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID},
			TaskID: taskID, RunID: r.RunID, TakenUntil: r.TakenUntil.Time}
		if r.Started != nil {
			h.Started = r.Started.Time
		}
		if q.Worker != nil && h.Worker != *q.Worker {
			continue
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing held runs: %w", err)
	}
	return out, nil
}
