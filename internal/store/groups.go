package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// TaskGroupStore is the queue's task groups.
type TaskGroupStore interface {
	GetTaskGroup(ctx context.Context, taskGroupID string) (*TaskGroup, error)
	ListTaskGroup(ctx context.Context, taskGroupID string, page Page) ([]*queue.TaskState, string, error)
	SealTaskGroup(ctx context.Context, taskGroupID string, now time.Time) (*TaskGroup, error)
	CancelTaskGroup(ctx context.Context, taskGroupID string, now time.Time) (*CancelGroupResult, error)
}

func scanGroup(row rowScanner) (*TaskGroup, error) {
	var (
		g       TaskGroup
		expires int64
		sealed  sql.NullInt64
	)
	if err := row.Scan(&g.TaskGroupID, &g.SchedulerID, &expires, &sealed); err != nil {
		return nil, err
	}
	g.Expires = fromMS(expires)
	if sealed.Valid {
		s := fromMS(sealed.Int64)
		g.Sealed = &s
	}
	return &g, nil
}

// GetTaskGroup implements Store.
func (db *DB) GetTaskGroup(ctx context.Context, taskGroupID string) (*TaskGroup, error) {
	g, err := scanGroup(db.queryRow(ctx, "SELECT task_group_id, scheduler_id, expires, sealed FROM task_groups WHERE task_group_id = ?", taskGroupID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading task group %s: %w", taskGroupID, err)
	}
	return g, nil
}

// ListTaskGroup implements Store: members ordered by taskId.
func (db *DB) ListTaskGroup(ctx context.Context, taskGroupID string, page Page) ([]*queue.TaskState, string, error) {
	tasks, next, err := listPage(ctx, db, page, func(after string) (string, []any, error) {
		return "SELECT " + prefixColumns("t.", taskColumns) + ` FROM task_group_members m JOIN tasks t ON t.task_id = m.task_id
			WHERE m.task_group_id = ? AND m.task_id > ? ORDER BY m.task_id LIMIT ?`,
			[]any{taskGroupID, after}, nil
	}, db.scanTask, taskIDCursor)
	if err != nil {
		return nil, "", fmt.Errorf("listing task group %s: %w", taskGroupID, err)
	}
	return tasks, next, nil
}

// SealTaskGroup implements Store; sealing an already sealed group keeps the
// original time. It serialises with createTask through the group row lock,
// so no task joins a group after it was sealed.
func (db *DB) SealTaskGroup(ctx context.Context, taskGroupID string, now time.Time) (*TaskGroup, error) {
	var g *TaskGroup
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		g, err = scanGroup(tx.queryRow(ctx, "SELECT task_group_id, scheduler_id, expires, sealed FROM task_groups WHERE task_group_id = ?"+db.dialect.LockRow, taskGroupID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("locking task group %s: %w", taskGroupID, err)
		}
		if g.Sealed != nil {
			return nil
		}
		sealed := now.UTC().Truncate(time.Millisecond)
		g.Sealed = &sealed
		_, err = tx.exec(ctx, "UPDATE task_groups SET sealed = ? WHERE task_group_id = ?", ms(sealed), taskGroupID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// CancelTaskGroup implements Store: in one transaction, every member whose
// deadline is still ahead and that is unscheduled, pending or running is
// resolved exception/canceled.
func (db *DB) CancelTaskGroup(ctx context.Context, taskGroupID string, now time.Time) (*CancelGroupResult, error) {
	var out *CancelGroupResult
	err := db.tx(ctx, func(tx *txn) error {
		out = &CancelGroupResult{}
		g, err := scanGroup(tx.queryRow(ctx, "SELECT task_group_id, scheduler_id, expires, sealed FROM task_groups WHERE task_group_id = ?"+db.dialect.LockRow, taskGroupID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("locking task group %s: %w", taskGroupID, err)
		}
		out.Group = g
		if g.Sealed == nil {
			return queue.Conflictf("Task group %s must be sealed before it can be cancelled", taskGroupID)
		}
		if err := tx.queryRow(ctx, "SELECT COUNT(*) FROM task_group_members WHERE task_group_id = ?", taskGroupID).Scan(&out.GroupSize); err != nil {
			return fmt.Errorf("counting task group %s: %w", taskGroupID, err)
		}
		ids, err := tx.cancellableGroupTasks(ctx, taskGroupID, now)
		if err != nil {
			return err
		}
		res := &Result{}
		for _, id := range ids {
			if _, err := tx.transition(ctx, id, now, func(t *queue.TaskState, tr *queue.Transition) error {
				return t.Cancel(now, tr)
			}, res); err != nil {
				return err
			}
			out.Canceled = append(out.Canceled, id)
		}
		out.Changes = res.Changes
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// cancellableGroupTasks lists, in taskId order (the order every canceller
// locks them in), the tasks of a group that are unresolved and still before
// their deadline: what cancelling the group (sealed, or by failFast) touches.
func (t *txn) cancellableGroupTasks(ctx context.Context, taskGroupID string, now time.Time) ([]string, error) {
	ids, err := t.queryStrings(ctx, "SELECT task_id FROM tasks WHERE task_group_id = ? AND unresolved = 1 AND deadline > ? ORDER BY task_id",
		taskGroupID, ms(now))
	if err != nil {
		return nil, fmt.Errorf("listing unresolved tasks of group %s: %w", taskGroupID, err)
	}
	return ids, nil
}
