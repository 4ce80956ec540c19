package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// GithubCheckStore persists the check runs of the builds that report with
// `reporting: checks-v1`: one per run of a task, whose state moves only
// forward and whose forge id is kept once the check run was created.
type GithubCheckStore interface {
	// AdvanceGithubCheck records a run's check at c.State if that is ahead
	// of the state stored (or none is), and queues entry (if not nil) in
	// the same transaction; it reports whether the check moved.
	AdvanceGithubCheck(ctx context.Context, c GithubCheck, now time.Time, entry *GithubOutboxEntry) (bool, error)
	// ListGithubChecks returns the checks of a task group's runs.
	ListGithubChecks(ctx context.Context, taskGroupID string) ([]GithubCheck, error)
	// GetGithubCheck loads the check of a task's run.
	GetGithubCheck(ctx context.Context, host, taskID string, runID int) (*GithubCheck, error)
	// FindGithubCheck finds the check of a forge's check run id.
	FindGithubCheck(ctx context.Context, host string, checkRunID int64) (*GithubCheck, error)
	// SetGithubCheckRunID records the forge's id of a created check run.
	SetGithubCheckRunID(ctx context.Context, p SetGithubCheckRunIDParams) error
}

// SetGithubCheckRunIDParams names a run's check and the forge's id of its
// check run.
type SetGithubCheckRunIDParams struct {
	Host, TaskID string
	RunID        int
	CheckRunID   int64
}

// GithubCheck is the check run of one run of a task.
type GithubCheck struct {
	Host, TaskID string
	RunID        int
	TaskGroupID  string
	// State is GitHub's check run status: queued, in_progress, completed.
	State string
	// CheckRunID is the forge's id (0 until the check run was created;
	// GithubCheckCreating while a create was sent and its id not yet
	// recorded).
	CheckRunID int64
}

// GithubCheckCreating is a check's CheckRunID from when its create is
// sent until the forge's id is recorded: a sender killed in between
// leaves it, and the next looks for the check run on the forge before
// creating one.
const GithubCheckCreating int64 = -1

// Check run states, in the only order a check moves through them.
var githubCheckStates = []string{"queued", "in_progress", "completed"}

// AdvanceGithubCheck implements GithubCheckStore.
func (db *DB) AdvanceGithubCheck(ctx context.Context, c GithubCheck, now time.Time, entry *GithubOutboxEntry) (bool, error) {
	rank := slices.Index(githubCheckStates, c.State)
	if rank < 0 {
		return false, fmt.Errorf("unknown check run state %q", c.State)
	}
	moved := false
	err := db.tx(ctx, func(tx *txn) error {
		moved = false
		res, err := tx.exec(ctx, `INSERT INTO github_checks (host, task_id, run_id, task_group_id, state, check_run_id) VALUES (?, ?, ?, ?, ?, 0)
			ON CONFLICT (host, task_id, run_id) DO NOTHING`, c.Host, c.TaskID, c.RunID, c.TaskGroupID, c.State)
		if err != nil {
			return fmt.Errorf("recording the check of %s run %d: %w", c.TaskID, c.RunID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			moved = true
		} else if rank > 0 {
			args := []any{c.State, c.Host, c.TaskID, c.RunID}
			marks := ""
			for i, s := range githubCheckStates[:rank] {
				if i > 0 {
					marks += ", "
				}
				marks += "?"
				args = append(args, s)
			}
			res, err := tx.exec(ctx, "UPDATE github_checks SET state = ? WHERE host = ? AND task_id = ? AND run_id = ? AND state IN ("+marks+")", args...)
			if err != nil {
				return fmt.Errorf("moving the check of %s run %d to %s: %w", c.TaskID, c.RunID, c.State, err)
			}
			n, _ := res.RowsAffected()
			moved = n == 1
		}
		if !moved || entry == nil {
			return nil
		}
		return tx.queueOutbox([]GithubOutboxEntry{*entry}, now)
	})
	return moved, err
}

const githubCheckColumns = "host, task_id, run_id, task_group_id, state, check_run_id"

func scanGithubCheck(row rowScanner) (GithubCheck, error) {
	var c GithubCheck
	err := row.Scan(&c.Host, &c.TaskID, &c.RunID, &c.TaskGroupID, &c.State, &c.CheckRunID)
	return c, err
}

// ListGithubChecks implements GithubCheckStore.
func (db *DB) ListGithubChecks(ctx context.Context, taskGroupID string) ([]GithubCheck, error) {
	rows, err := db.query(ctx, "SELECT "+githubCheckColumns+" FROM github_checks WHERE task_group_id = ? ORDER BY task_id, run_id", taskGroupID)
	if err != nil {
		return nil, fmt.Errorf("listing the checks of %s: %w", taskGroupID, err)
	}
	defer rows.Close()
	var out []GithubCheck
	for rows.Next() {
		c, err := scanGithubCheck(rows)
		if err != nil {
			return nil, fmt.Errorf("listing the checks of %s: %w", taskGroupID, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// GetGithubCheck implements GithubCheckStore.
func (db *DB) GetGithubCheck(ctx context.Context, host, taskID string, runID int) (*GithubCheck, error) {
	c, err := scanGithubCheck(db.queryRow(ctx, "SELECT "+githubCheckColumns+" FROM github_checks WHERE host = ? AND task_id = ? AND run_id = ?",
		host, taskID, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading the check of %s run %d: %w", taskID, runID, err)
	}
	return &c, nil
}

// SetGithubCheckRunID implements GithubCheckStore.
func (db *DB) SetGithubCheckRunID(ctx context.Context, p SetGithubCheckRunIDParams) error {
	return db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "UPDATE github_checks SET check_run_id = ? WHERE host = ? AND task_id = ? AND run_id = ?", p.CheckRunID, p.Host, p.TaskID, p.RunID)
		if err != nil {
			return fmt.Errorf("recording the check run id of %s run %d: %w", p.TaskID, p.RunID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrNotFound
		}
		return nil
	})
}

// FindGithubCheck implements GithubCheckStore.
func (db *DB) FindGithubCheck(ctx context.Context, host string, checkRunID int64) (*GithubCheck, error) {
	if checkRunID == 0 {
		return nil, ErrNotFound
	}
	c, err := scanGithubCheck(db.queryRow(ctx, "SELECT "+githubCheckColumns+" FROM github_checks WHERE host = ? AND check_run_id = ?", host, checkRunID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("finding check run %d: %w", checkRunID, err)
	}
	return &c, nil
}
