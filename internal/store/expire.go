package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// ExpireClaims implements Store.
func (db *DB) ExpireClaims(ctx context.Context, now time.Time, limit int) (*Result, error) {
	rows, err := db.query(ctx, `SELECT task_id, taken_until FROM tasks WHERE taken_until IS NOT NULL AND taken_until <= ? AND deadline > ?
		ORDER BY taken_until LIMIT ?`, ms(now), ms(now), limit)
	if err != nil {
		return nil, fmt.Errorf("finding expired claims: %w", err)
	}
	type due struct {
		taskID string
		until  int64
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.taskID, &d.until); err != nil {
			rows.Close()
			return nil, fmt.Errorf("finding expired claims: %w", err)
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finding expired claims: %w", err)
	}
	total := &Result{}
	for _, d := range dues {
		res, err := db.UpdateTask(ctx, UpdateTaskParams{TaskID: d.taskID, Now: now, Apply: func(t *queue.TaskState, tr *queue.Transition) error {
			t.ExpireClaim(fromMS(d.until), now, tr)
			return nil
		}})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return total, fmt.Errorf("expiring claim of %s: %w", d.taskID, err)
		}
		total.Changes = append(total.Changes, res.Changes...)
	}
	return total, nil
}

// ExpireDeadlines implements Store: tasks whose deadline is at or before
// cutoff and that are not resolved are resolved deadline-exceeded.
func (db *DB) ExpireDeadlines(ctx context.Context, cutoff, now time.Time, limit int) (*Result, error) {
	rows, err := db.query(ctx, "SELECT task_id FROM tasks WHERE unresolved = 1 AND deadline <= ? ORDER BY deadline LIMIT ?", ms(cutoff), limit)
	if err != nil {
		return nil, fmt.Errorf("finding tasks past deadline: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("finding tasks past deadline: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finding tasks past deadline: %w", err)
	}
	total := &Result{}
	for _, id := range ids {
		res, err := db.UpdateTask(ctx, UpdateTaskParams{TaskID: id, Now: now, Apply: func(t *queue.TaskState, tr *queue.Transition) error {
			t.ExpireDeadline(now, tr)
			return nil
		}})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return total, fmt.Errorf("resolving deadline of %s: %w", id, err)
		}
		total.Changes = append(total.Changes, res.Changes...)
	}
	return total, nil
}

// expireStep is one deletion of a service's expiry, counted into count if
// set.
type expireStep struct {
	count *int
	query string
	args  []any
}

// expireRows runs one service's deletions (what names them) in one
// transaction: each service's expiry method (ExpireSecrets, ExpireIndex,
// …) lists its steps in its own store file, beside its rows.
func (db *DB) expireRows(ctx context.Context, what string, steps func() []expireStep) error {
	// The steps (and their counts) are made afresh on every attempt.
	return db.tx(ctx, func(tx *txn) error { return tx.expire(ctx, what, steps()) })
}

// expire runs deletions in the transaction.
func (t *txn) expire(ctx context.Context, what string, steps []expireStep) error {
	for _, s := range steps {
		res, err := t.exec(ctx, s.query, s.args...)
		if err != nil {
			return fmt.Errorf("expiring %s (%s): %w", what, s.query, err)
		}
		if s.count != nil {
			n, _ := res.RowsAffected()
			*s.count = int(n)
		}
	}
	return nil
}

// ExpiredQueueData counts what the queue's expiry removed; Blobs lists the
// stored artifact data the caller must delete from blob storage.
type ExpiredQueueData struct {
	Tasks, TaskGroups, Artifacts, TaskQueues, Workers int
	Blobs                                             []ExpiredArtifact
}

// ExpiredArtifact names an expired artifact whose data may need deleting.
type ExpiredArtifact struct {
	TaskID      string
	RunID       int
	Name        string
	StorageType string
	Details     []byte
}

// ExpireQueueData implements Store: it deletes, in one transaction, the
// tasks whose expiry has passed with their dependency edges and artifacts,
// their task groups, and the task queues and workers (kept while
// quarantined) whose expiry has passed.
func (db *DB) ExpireQueueData(ctx context.Context, now time.Time) (*ExpiredQueueData, error) {
	var out *ExpiredQueueData
	cutoff := ms(now)
	// An artifact goes when it expires or when its task does; either way
	// its stored data must be reported for deletion.
	const expiredArtifacts = "expires < ? OR task_id IN (SELECT task_id FROM task_group_members WHERE expires < ?)"
	err := db.tx(ctx, func(tx *txn) error {
		out = &ExpiredQueueData{} // afresh on every attempt
		err := tx.queryEach(ctx, "SELECT task_id, run_id, name, storage_type, details FROM artifacts WHERE "+expiredArtifacts, []any{cutoff, cutoff}, func(rows Rows) error {
			for rows.Next() {
				var a ExpiredArtifact
				var details string
				if err := rows.Scan(&a.TaskID, &a.RunID, &a.Name, &a.StorageType, &details); err != nil {
					return err
				}
				a.Details = []byte(details)
				out.Blobs = append(out.Blobs, a)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("finding expired artifacts: %w", err)
		}
		steps := []expireStep{
			{&out.Artifacts, "DELETE FROM artifacts WHERE " + expiredArtifacts, []any{cutoff, cutoff}},
			{nil, "DELETE FROM task_dependencies WHERE expires < ?", []any{cutoff}},
			// A task's expiry is found through its group membership
			// (migration 008), which goes after it.
			{&out.Tasks, "DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM task_group_members WHERE expires < ?)", []any{cutoff}},
			{nil, "DELETE FROM task_group_members WHERE expires < ?", []any{cutoff}},
			{&out.TaskGroups, "DELETE FROM task_groups WHERE expires < ?", []any{cutoff}},
			{&out.TaskQueues, "DELETE FROM task_queues WHERE expires < ?", []any{cutoff}},
			{&out.Workers, "DELETE FROM workers WHERE expires < ? AND quarantine_until < ?", []any{cutoff, cutoff}},
		}
		return tx.expire(ctx, "tasks", steps)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
