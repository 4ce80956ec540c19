package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// TaskQueueStore is the queue's task queues, their pending and claimed
// runs, and the workers that claim from them.
type TaskQueueStore interface {
	TaskQueueCounts(ctx context.Context, taskQueueID string, now time.Time) (pending, claimed int, err error)
	ListPending(ctx context.Context, taskQueueID string, now time.Time, page Page) ([]PendingEntry, string, error)
	ListClaimed(ctx context.Context, taskQueueID string, now time.Time, page Page) ([]ClaimedEntry, string, error)
	TouchTaskQueue(ctx context.Context, p TouchTaskQueueParams) (*TaskQueue, error)
	GetTaskQueue(ctx context.Context, taskQueueID string, now time.Time) (*TaskQueue, error)
	ListTaskQueues(ctx context.Context, now time.Time, filter TaskQueueFilter, page Page) ([]TaskQueue, string, error)
	TouchWorker(ctx context.Context, p TouchWorkerParams) (*Worker, error)
	GetWorker(ctx context.Context, key WorkerKey, now time.Time) (*Worker, error)
	ListWorkers(ctx context.Context, now time.Time, filter WorkerFilter, page Page) ([]Worker, string, error)
	QuarantineWorker(ctx context.Context, p QuarantineWorkerParams) (*Worker, error)
	AddRecentTasks(ctx context.Context, key WorkerKey, tasks []RecentTask) error
	// TouchMany records many task queues and workers as seen, then adds
	// runs to workers' recent tasks as AddRecentTasks would, in one
	// transaction (touch_batch.go): claimWork's bookkeeping, written in
	// batches.
	TouchMany(ctx context.Context, queues []TouchTaskQueueParams, workers []TouchWorkerParams, recent []RecentTasksParams) error
}

// TaskQueueCounts implements Store: pending runs whose deadline is ahead,
// and running runs whose claim has not run out.
func (db *DB) TaskQueueCounts(ctx context.Context, taskQueueID string, now time.Time) (int, int, error) {
	var pending, claimed int
	if err := db.queryRow(ctx, "SELECT COUNT(*) FROM tasks WHERE task_queue_id = ? AND pending_seq IS NOT NULL AND deadline > ?",
		taskQueueID, ms(now)).Scan(&pending); err != nil {
		return 0, 0, fmt.Errorf("counting pending tasks of %s: %w", taskQueueID, err)
	}
	if err := db.queryRow(ctx, "SELECT COUNT(*) FROM tasks WHERE task_queue_id = ? AND taken_until > ?",
		taskQueueID, ms(now)).Scan(&claimed); err != nil {
		return 0, 0, fmt.Errorf("counting claimed tasks of %s: %w", taskQueueID, err)
	}
	return pending, claimed, nil
}

// timedTask is a task listed with the time it is ordered by.
type timedTask struct {
	task *queue.TaskState
	at   time.Time
}

// listByTime pages through the tasks of one queue that match where, ordered
// by timeColumn then taskId (listPendingTasks and listClaimedTasks). The
// continuation token is the last (time, taskId) returned.
func (db *DB) listByTime(ctx context.Context, timeColumn, where string, args []any, page Page) ([]timedTask, string, error) {
	return listPage(ctx, db, page, func(cursor string) (string, []any, error) {
		afterMS, afterID, err := splitCursor(cursor)
		if err != nil {
			return "", nil, err
		}
		return "SELECT " + taskColumns + ", " + timeColumn + " FROM tasks WHERE " + where +
				" AND (" + timeColumn + " > ? OR (" + timeColumn + " = ? AND task_id > ?)) ORDER BY " + timeColumn + ", task_id LIMIT ?",
			append(args, afterMS, afterMS, afterID), nil
	}, func(row rowScanner) (timedTask, error) {
		var (
			at int64
			s  storedTask
			t  queue.TaskState
		)
		if err := row.Scan(append(s.dest(&t), &at)...); err != nil {
			return timedTask{}, err
		}
		if err := db.decodeTask(&t, &s); err != nil {
			return timedTask{}, err
		}
		return timedTask{task: &t, at: fromMS(at)}, nil
	}, func(tt timedTask) string { return timeCursor(ms(tt.at), tt.task.TaskID) })
}

// ListPending implements Store: pending runs ordered by the time they were
// queued.
func (db *DB) ListPending(ctx context.Context, taskQueueID string, now time.Time, page Page) ([]PendingEntry, string, error) {
	tasks, next, err := db.listByTime(ctx, "pending_since",
		"task_queue_id = ? AND pending_seq IS NOT NULL AND deadline > ?", []any{taskQueueID, ms(now)}, page)
	if err != nil {
		return nil, "", fmt.Errorf("listing pending tasks of %s: %w", taskQueueID, err)
	}
	out := make([]PendingEntry, len(tasks))
	for i, tt := range tasks {
		out[i] = PendingEntry{Task: tt.task, RunID: len(tt.task.Runs) - 1, Inserted: tt.at}
	}
	return out, next, nil
}

// ListClaimed implements Store: running runs ordered by claim time.
func (db *DB) ListClaimed(ctx context.Context, taskQueueID string, now time.Time, page Page) ([]ClaimedEntry, string, error) {
	tasks, next, err := db.listByTime(ctx, "claimed_at",
		"task_queue_id = ? AND state = 'running' AND claimed_at IS NOT NULL", []any{taskQueueID}, page)
	if err != nil {
		return nil, "", fmt.Errorf("listing claimed tasks of %s: %w", taskQueueID, err)
	}
	out := make([]ClaimedEntry, len(tasks))
	for i, tt := range tasks {
		r := tt.task.LastRun()
		out[i] = ClaimedEntry{Task: tt.task, RunID: r.RunID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID, Claimed: tt.at}
	}
	return out, next, nil
}

func scanTaskQueue(row rowScanner) (*TaskQueue, error) {
	var q TaskQueue
	var expires, active int64
	if err := row.Scan(&q.TaskQueueID, &q.Description, &q.Stability, &expires, &active); err != nil {
		return nil, err
	}
	q.Expires, q.LastDateActive = fromMS(expires), fromMS(active)
	return &q, nil
}

const taskQueueColumns = "task_queue_id, description, stability, expires, last_date_active"

// TouchTaskQueue implements Store: creates the record or refreshes it;
// expires never shrinks.
func (db *DB) TouchTaskQueue(ctx context.Context, p TouchTaskQueueParams) (*TaskQueue, error) {
	var q *TaskQueue
	err := db.tx(ctx, func(tx *txn) error {
		desc, stab := "", "experimental"
		if p.Description != nil {
			desc = *p.Description
		}
		if p.Stability != nil {
			stab = *p.Stability
		}
		if _, err := tx.exec(ctx, `INSERT INTO task_queues (task_queue_id, description, stability, expires, last_date_active)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_queue_id) DO UPDATE SET
			expires = CASE WHEN excluded.expires > task_queues.expires THEN excluded.expires ELSE task_queues.expires END,
			last_date_active = excluded.last_date_active`,
			p.TaskQueueID, desc, stab, ms(p.Expires), ms(p.Now)); err != nil {
			return fmt.Errorf("recording task queue %s: %w", p.TaskQueueID, err)
		}
		if p.Description != nil {
			if _, err := tx.exec(ctx, "UPDATE task_queues SET description = ? WHERE task_queue_id = ?", desc, p.TaskQueueID); err != nil {
				return err
			}
		}
		if p.Stability != nil {
			if _, err := tx.exec(ctx, "UPDATE task_queues SET stability = ? WHERE task_queue_id = ?", stab, p.TaskQueueID); err != nil {
				return err
			}
		}
		var err error
		q, err = scanTaskQueue(tx.queryRow(ctx, "SELECT "+taskQueueColumns+" FROM task_queues WHERE task_queue_id = ?", p.TaskQueueID))
		return err
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// GetTaskQueue implements Store; expired queues are not found.
func (db *DB) GetTaskQueue(ctx context.Context, taskQueueID string, now time.Time) (*TaskQueue, error) {
	q, err := scanTaskQueue(db.queryRow(ctx, "SELECT "+taskQueueColumns+" FROM task_queues WHERE task_queue_id = ? AND expires > ?", taskQueueID, ms(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading task queue %s: %w", taskQueueID, err)
	}
	return q, nil
}

// ListTaskQueues implements Store: non-expired queues ordered by id.
func (db *DB) ListTaskQueues(ctx context.Context, now time.Time, filter TaskQueueFilter, page Page) ([]TaskQueue, string, error) {
	out, next, err := listPage(ctx, db, page, func(after string) (string, []any, error) {
		query := "SELECT " + taskQueueColumns + " FROM task_queues WHERE expires > ? AND task_queue_id > ?"
		args := []any{ms(now), after}
		if filter.ProvisionerID != "" {
			query += " AND task_queue_id >= ? AND task_queue_id < ?"
			args = append(args, filter.ProvisionerID+"/", filter.ProvisionerID+"0") // '0' sorts right after '/'
		}
		return query + " ORDER BY task_queue_id LIMIT ?", args, nil
	}, scanTaskQueueValue, func(q TaskQueue) string { return q.TaskQueueID })
	if err != nil {
		return nil, "", fmt.Errorf("listing task queues: %w", err)
	}
	return out, next, nil
}

func scanTaskQueueValue(row rowScanner) (TaskQueue, error) {
	q, err := scanTaskQueue(row)
	if err != nil {
		return TaskQueue{}, err
	}
	return *q, nil
}

const workerColumns = "task_queue_id, worker_group, worker_id, first_claim, last_date_active, expires, quarantine_until, quarantine_details, recent_tasks, capacity"

func scanWorker(row rowScanner) (*Worker, error) {
	var (
		w                                  Worker
		first, active, expires, quarantine int64
		details, recent                    string
	)
	if err := row.Scan(&w.TaskQueueID, &w.WorkerGroup, &w.WorkerID, &first, &active, &expires, &quarantine, &details, &recent, &w.Capacity); err != nil {
		return nil, err
	}
	w.FirstClaim, w.LastDateActive, w.Expires, w.QuarantineUntil = fromMS(first), fromMS(active), fromMS(expires), fromMS(quarantine)
	if err := json.Unmarshal([]byte(details), &w.QuarantineDetails); err != nil {
		return nil, fmt.Errorf("decoding quarantine details: %w", err)
	}
	if err := json.Unmarshal([]byte(recent), &w.RecentTasks); err != nil {
		return nil, fmt.Errorf("decoding recent tasks: %w", err)
	}
	return &w, nil
}

// capacityUpdate is the SET clause of a touch's capacity
// (TouchWorkerParams.Capacity): an ask of 0 keeps it, a larger ask raises
// it, and a worker unseen for longer than the parameter (in ms) before
// the touch takes its ask, larger or not (every SET clause reads the row
// as it was before the touch).
const capacityUpdate = `capacity = CASE WHEN excluded.capacity = 0 THEN workers.capacity
	WHEN excluded.capacity > workers.capacity OR workers.last_date_active < excluded.last_date_active - ? THEN excluded.capacity
	ELSE workers.capacity END`

// TouchWorker implements Store.
func (db *DB) TouchWorker(ctx context.Context, p TouchWorkerParams) (*Worker, error) {
	var w *Worker
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, `INSERT INTO workers (`+workerColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, 0, '[]', '[]', ?) ON CONFLICT (task_queue_id, worker_group, worker_id) DO UPDATE SET
			expires = CASE WHEN excluded.expires > workers.expires THEN excluded.expires ELSE workers.expires END,
			last_date_active = excluded.last_date_active, `+capacityUpdate,
			p.Key.TaskQueueID, p.Key.WorkerGroup, p.Key.WorkerID, ms(p.Now), ms(p.Now), ms(p.Expires), max(p.Capacity, 0),
			WorkerCapacityAbsence.Milliseconds()); err != nil {
			return fmt.Errorf("recording worker %s/%s: %w", p.Key.WorkerGroup, p.Key.WorkerID, err)
		}
		var err error
		w, err = scanWorker(tx.queryRow(ctx, "SELECT "+workerColumns+" FROM workers WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ?",
			p.Key.TaskQueueID, p.Key.WorkerGroup, p.Key.WorkerID))
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// GetWorker implements Store: unknown, or expired and not quarantined, is
// not found.
func (db *DB) GetWorker(ctx context.Context, key WorkerKey, now time.Time) (*Worker, error) {
	w, err := scanWorker(db.queryRow(ctx, "SELECT "+workerColumns+` FROM workers
		WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ? AND (expires > ? OR quarantine_until > ?)`,
		key.TaskQueueID, key.WorkerGroup, key.WorkerID, ms(now), ms(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading worker %s/%s: %w", key.WorkerGroup, key.WorkerID, err)
	}
	return w, nil
}

// ListWorkers implements Store.
func (db *DB) ListWorkers(ctx context.Context, now time.Time, filter WorkerFilter, page Page) ([]Worker, string, error) {
	out, next, err := listPageFields(ctx, db, page, 2, func(cursor string) (string, []any, error) {
		afterGroup, afterID, _ := strings.Cut(cursor, "\x00")
		query := "SELECT " + workerColumns + ` FROM workers WHERE task_queue_id = ? AND (expires > ? OR quarantine_until > ?)
		AND (worker_group > ? OR (worker_group = ? AND worker_id > ?))`
		args := []any{filter.TaskQueueID, ms(now), ms(now), afterGroup, afterGroup, afterID}
		if filter.Quarantined != nil {
			if *filter.Quarantined {
				query += " AND quarantine_until >= ?"
			} else {
				query += " AND quarantine_until < ?"
			}
			args = append(args, ms(now))
		}
		return query + " ORDER BY worker_group, worker_id LIMIT ?", args, nil
	}, func(row rowScanner) (Worker, error) {
		w, err := scanWorker(row)
		if err != nil {
			return Worker{}, err
		}
		return *w, nil
	}, func(w Worker) string { return w.WorkerGroup + "\x00" + w.WorkerID })
	if err != nil {
		return nil, "", fmt.Errorf("listing workers of %s: %w", filter.TaskQueueID, err)
	}
	return out, next, nil
}

// QuarantineWorker implements Store; the worker must have been seen.
func (db *DB) QuarantineWorker(ctx context.Context, p QuarantineWorkerParams) (*Worker, error) {
	var w *Worker
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		w, err = scanWorker(tx.queryRow(ctx, "SELECT "+workerColumns+" FROM workers WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ?"+db.dialect.LockRow,
			p.Key.TaskQueueID, p.Key.WorkerGroup, p.Key.WorkerID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("loading worker: %w", err)
		}
		w.QuarantineUntil = p.QuarantineUntil.UTC().Truncate(time.Millisecond)
		if min := p.Now.Add(24 * time.Hour); w.Expires.Before(min) {
			w.Expires = min.UTC().Truncate(time.Millisecond)
		}
		w.QuarantineDetails = append(w.QuarantineDetails, p.Detail)
		details, err := json.Marshal(w.QuarantineDetails)
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx, "UPDATE workers SET quarantine_until = ?, expires = ?, quarantine_details = ? WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ?",
			ms(w.QuarantineUntil), ms(w.Expires), string(details), p.Key.TaskQueueID, p.Key.WorkerGroup, p.Key.WorkerID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// maxRecentTasks is how many {taskId, runId} pairs a worker record keeps.
const maxRecentTasks = 20

// AddRecentTasks implements Store.
func (db *DB) AddRecentTasks(ctx context.Context, key WorkerKey, tasks []RecentTask) error {
	if len(tasks) == 0 {
		return nil
	}
	return db.tx(ctx, func(tx *txn) error { return tx.addRecentTasks(ctx, key, tasks) })
}

// addRecentTasks appends to a known worker's recent tasks (keeping the last
// maxRecentTasks); unknown workers keep no history.
func (t *txn) addRecentTasks(ctx context.Context, key WorkerKey, tasks []RecentTask) error {
	var worker workerClaimRecord
	t.send(t.workerClaimRecordStatement(key, &worker, true))
	if err := t.flush(ctx); err != nil {
		return err
	}
	if !worker.found {
		return nil
	}
	return t.sendRecentTasks(key, worker.recentTasks, tasks, nil)
}

// workerClaimRecord is what a claim reads of the worker's record.
type workerClaimRecord struct {
	found           bool
	recentTasks     string
	quarantineUntil int64
	// stopped says its pool's manager stopped it (ClaimWorkParams.CheckStopped).
	stopped bool
}

// workerClaimRecordStatement reads the worker's recent tasks and quarantine,
// locking the record until the transaction ends if lock is set.
func (t *txn) workerClaimRecordStatement(key WorkerKey, into *workerClaimRecord, lock bool) Statement {
	query := "SELECT recent_tasks, quarantine_until FROM workers WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ?"
	if lock {
		query += t.db.dialect.LockRow
	}
	return Statement{
		Query: query,
		Args:  []any{key.TaskQueueID, key.WorkerGroup, key.WorkerID},
		What:  "loading worker " + key.WorkerGroup + "/" + key.WorkerID,
		Rows: func(rows Rows) error {
			err := scanOne(rows, &into.recentTasks, &into.quarantineUntil)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			into.found = err == nil
			return err
		},
	}
}

// sendRecentTasks queues the write of the worker's recent tasks: the list
// read (recentJSON) with tasks appended, the last maxRecentTasks kept. With
// written set, the write is conditional on the list being still the one
// read (for a read that took no lock), and *written reports whether it was.
func (t *txn) sendRecentTasks(key WorkerKey, recentJSON string, tasks []RecentTask, written *bool) error {
	var list []RecentTask
	if err := json.Unmarshal([]byte(recentJSON), &list); err != nil {
		return fmt.Errorf("decoding recent tasks: %w", err)
	}
	list = append(list, tasks...)
	if len(list) > maxRecentTasks {
		list = list[len(list)-maxRecentTasks:]
	}
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encoding recent tasks: %w", err)
	}
	st := Statement{Query: "UPDATE workers SET recent_tasks = ? WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ?",
		Args: []any{string(b), key.TaskQueueID, key.WorkerGroup, key.WorkerID},
		What: "recording recent tasks of " + key.WorkerGroup + "/" + key.WorkerID}
	if written != nil {
		st.Query += " AND recent_tasks = ?"
		st.Args = append(st.Args, recentJSON)
		st.Exec = func(n int64) error {
			*written = n > 0
			return nil
		}
	}
	t.send(st)
	return nil
}
