package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// TaskStore is the queue's tasks: their creation, claims and transitions,
// and what resolves or deletes them in the background.
type TaskStore interface {
	CreateTask(ctx context.Context, p CreateTaskParams) (*Result, error)
	GetTask(ctx context.Context, taskID string) (*queue.TaskState, error)
	GetTasks(ctx context.Context, taskIDs []string) ([]*queue.TaskState, error)
	UpdateTask(ctx context.Context, p UpdateTaskParams) (*Result, error)
	ClaimWork(ctx context.Context, p ClaimWorkParams) (*ClaimResult, error)
	ListDependents(ctx context.Context, taskID string, page Page) ([]*queue.TaskState, string, error)

	// Background resolution (expire.go). Each is safe to run from several
	// processes at once: every candidate is re-checked under its row lock.
	ExpireClaims(ctx context.Context, now time.Time, limit int) (*Result, error)
	ExpireDeadlines(ctx context.Context, cutoff, now time.Time, limit int) (*Result, error)
	// ExpireQueueData is the queue's expiry (expire.go); every other
	// service's is a method of its own interface, beside its rows.
	ExpireQueueData(ctx context.Context, now time.Time) (*ExpiredQueueData, error)
}

// taskColumns are the columns a task is read from (storedTask.dest):
// its definition and runs, and the flow policy createTask parsed from the
// definition's flow block (flow, flow_key: flowColumn), so that reading a
// task never parses the block again.
const taskColumns = "task_id, definition, retries_left, runs, flow, flow_key"

type rowScanner interface{ Scan(dest ...any) error }

// storedTask is a task's row as taskColumns reads it, before decodeTask.
type storedTask struct {
	def, runs string
	flow      sql.NullInt64
	flowKey   sql.NullString
}

// dest are the scan targets of taskColumns, filling t's id and retries;
// a query reading more columns appends its own.
func (s *storedTask) dest(t *queue.TaskState) []any {
	return []any{&t.TaskID, &s.def, &t.RetriesLeft, &s.runs, &s.flow, &s.flowKey}
}

func (db *DB) scanTask(row rowScanner) (*queue.TaskState, error) {
	var (
		t queue.TaskState
		s storedTask
	)
	if err := row.Scan(s.dest(&t)...); err != nil {
		return nil, err
	}
	if err := db.decodeTask(&t, &s); err != nil {
		return nil, err
	}
	return &t, nil
}

// decodeTask fills a task state from its stored row. Definitions never
// change once created, so decoded ones are kept in a bounded cache: every
// transition loads its task, and decoding the definition was a large share
// of each call's CPU. A cached entry is used only while the stored text is
// byte-for-byte the one it was decoded from. The flow policy is the one
// stored beside the definition at create (as immutable as it, so cached
// with it), never parsed again from the definition's flow block.
func (db *DB) decodeTask(t *queue.TaskState, s *storedTask) error {
	t.DefinitionJSON = s.def
	if cached, ok := db.defs.get(t.TaskID, s.def); ok {
		t.Task = cached
	} else {
		if err := json.Unmarshal([]byte(s.def), &t.Task); err != nil {
			return fmt.Errorf("decoding definition of task %s: %w", t.TaskID, err)
		}
		t.Task.Flow = decodeFlowColumn(s.flow, s.flowKey)
		db.defs.put(t.TaskID, s.def, t.Task)
	}
	if cached, ok := db.defs.getRuns(t.TaskID, s.runs); ok {
		t.Runs = cached
		return nil
	}
	if err := json.Unmarshal([]byte(s.runs), &t.Runs); err != nil {
		return fmt.Errorf("decoding runs of task %s: %w", t.TaskID, err)
	}
	return nil
}

func (db *DB) scanTasks(rows *sql.Rows) ([]*queue.TaskState, error) {
	defer rows.Close()
	out, err := db.readTasks(rows)
	if err != nil {
		return nil, err
	}
	return out, rows.Err()
}

// readTasks decodes every row of a task query.
func (db *DB) readTasks(rows Rows) ([]*queue.TaskState, error) {
	var out []*queue.TaskState
	for rows.Next() {
		t, err := db.scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// GetTask implements Store.
func (db *DB) GetTask(ctx context.Context, taskID string) (*queue.TaskState, error) {
	t, err := db.scanTask(db.queryRow(ctx, "SELECT "+taskColumns+" FROM tasks WHERE task_id = ?", taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading task %s: %w", taskID, err)
	}
	return t, nil
}

// GetTasks implements Store; unknown ids are skipped.
func (db *DB) GetTasks(ctx context.Context, taskIDs []string) ([]*queue.TaskState, error) {
	var out []*queue.TaskState
	for start := 0; start < len(taskIDs); start += 500 {
		chunk := taskIDs[start:min(start+500, len(taskIDs))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := db.query(ctx, "SELECT "+taskColumns+" FROM tasks WHERE task_id IN ("+placeholders(len(chunk))+") ORDER BY task_id", args...)
		if err != nil {
			return nil, fmt.Errorf("loading tasks: %w", err)
		}
		ts, err := db.scanTasks(rows)
		if err != nil {
			return nil, fmt.Errorf("loading tasks: %w", err)
		}
		out = append(out, ts...)
	}
	return out, nil
}

// ListDependents implements Store.
func (db *DB) ListDependents(ctx context.Context, taskID string, page Page) ([]*queue.TaskState, string, error) {
	tasks, next, err := listPage(ctx, db, page, func(after string) (string, []any, error) {
		return "SELECT " + prefixColumns("t.", taskColumns) + ` FROM task_dependencies d
		JOIN tasks t ON t.task_id = d.dependent_task_id
		WHERE d.required_task_id = ? AND d.dependent_task_id > ? ORDER BY d.dependent_task_id LIMIT ?`, []any{taskID, after}, nil
	}, db.scanTask, taskIDCursor)
	if err != nil {
		return nil, "", fmt.Errorf("listing dependents of %s: %w", taskID, err)
	}
	return tasks, next, nil
}

// encodeRuns encodes a task's runs for storage and remembers them, so the
// next load of the task (usually its next transition) need not decode
// them: a cached copy is used only while the stored text is exactly this.
func (db *DB) encodeRuns(t *queue.TaskState) (string, error) {
	b, err := json.Marshal(t.Runs)
	if err != nil {
		return "", fmt.Errorf("encoding runs of %s: %w", t.TaskID, err)
	}
	raw := string(b)
	db.defs.putRuns(t.TaskID, raw, t.Runs)
	return raw, nil
}
