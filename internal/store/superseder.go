package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// SupersederStore is what the built-in superseder reads (supersederapi):
// the requesting task, and the pending tasks of its queue with a route.
type SupersederStore interface {
	GetTask(ctx context.Context, taskID string) (*queue.TaskState, error)
	PendingWithRoute(ctx context.Context, p PendingWithRouteParams) ([]PendingEntry, error)
}

// PendingWithRouteParams selects the pending tasks of TaskQueueID with
// Route, claimable at Now; Limit bounds how many (0: no limit).
type PendingWithRouteParams struct {
	TaskQueueID, Route string
	Now                time.Time
	Limit              int
}

// maxRouteScan bounds how many rows PendingWithRoute reads, whatever limit
// the caller asks for, so one request cannot make the store decode an
// unbounded backlog.
const maxRouteScan = 5000

// PendingWithRoute implements Store: the claimable pending tasks of a task
// queue (last run pending, deadline after now) whose definition lists route
// among its routes — the candidates of hopper's built-in superseder
// (docs/contract/worker.md §5.9).
//
// Routes live inside the definition JSON, so the SQL narrows the queue's
// pending rows with a LIKE on the route's JSON encoding (the exact bytes
// json.Marshal wrote into the definition; SQLite's case-insensitive LIKE
// only lets extra rows through) and Go checks the decoded routes exactly.
// When more than limit tasks match, the limit most recently queued ones are
// kept (limit ≤ 0 means no limit); at most the 5000 most recently queued
// rows passing the LIKE are read. The result is ordered by creation time, oldest first, ties by
// taskId; each entry's Inserted is when its pending run was scheduled.
func (db *DB) PendingWithRoute(ctx context.Context, p PendingWithRouteParams) ([]PendingEntry, error) {
	limit, route := p.Limit, p.Route
	if limit <= 0 {
		limit = maxRouteScan
	}
	encoded, err := json.Marshal(route)
	if err != nil {
		return nil, fmt.Errorf("encoding route %q: %w", route, err)
	}
	pattern := "%" + escapeLike(string(encoded)) + "%"
	rows, err := db.query(ctx, "SELECT "+taskColumns+`, pending_since FROM tasks
		WHERE task_queue_id = ? AND pending_seq IS NOT NULL AND deadline > ?
		AND definition LIKE ? ESCAPE '\'
		ORDER BY pending_since DESC, task_id DESC LIMIT ?`, p.TaskQueueID, ms(p.Now), pattern, maxRouteScan)
	if err != nil {
		return nil, fmt.Errorf("listing pending tasks of %s with route %q: %w", p.TaskQueueID, route, err)
	}
	defer rows.Close()
	var out []PendingEntry
	for rows.Next() {
		var since int64
		var s storedTask
		e := PendingEntry{Task: &queue.TaskState{}}
		if err := rows.Scan(append(s.dest(e.Task), &since)...); err != nil {
			return nil, fmt.Errorf("reading pending task with route %q: %w", route, err)
		}
		if err := db.decodeTask(e.Task, &s); err != nil {
			return nil, err
		}
		if !slices.Contains(e.Task.Task.Routes, route) {
			continue
		}
		e.Inserted = fromMS(since)
		e.RunID = len(e.Task.Runs) - 1
		out = append(out, e)
		if len(out) == limit {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing pending tasks with route %q: %w", route, err)
	}
	slices.SortFunc(out, func(a, b PendingEntry) int {
		if c := a.Task.Task.Created.Compare(b.Task.Task.Created.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Task.TaskID, b.Task.TaskID)
	})
	return out, nil
}

// escapeLike escapes the LIKE wildcards of s (and the escape character
// itself) for a pattern written with ESCAPE '\'.
func escapeLike(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}
