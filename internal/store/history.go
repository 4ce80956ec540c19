package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// HistoryStore finds tasks without knowing their taskId: by state, task
// queue, task group, name and creation time, across every queue, newest
// first. Each query walks an index in its order (migration 013), so a page
// costs about its own rows however many tasks are kept; only the
// unresolved states without a group (pending, running, unscheduled) are
// sorted, from the partial indexes that keep them.
type HistoryStore interface {
	ListTasks(ctx context.Context, f TaskFilter, page Page) ([]HistoryTask, string, error)
}

// TaskFilter narrows ListTasks; every field is optional.
type TaskFilter struct {
	// State is a task state: unscheduled, pending, running, completed,
	// failed or exception.
	State       string
	TaskQueueID string
	TaskGroupID string
	// Name is found anywhere in the task's metadata.name, ignoring ASCII
	// case.
	Name string
	// CreatedFrom and CreatedTo bound the task's created time: from
	// included, to excluded; zero means unbounded.
	CreatedFrom, CreatedTo time.Time
}

// HistoryTask is one task of a listing.
type HistoryTask struct {
	*queue.TaskState
	// created is the indexed creation time (ms), the page's cursor.
	created int64
}

// resolvedStates are the states the index of resolved tasks lists.
var resolvedStates = map[string]bool{queue.StateCompleted: true, queue.StateFailed: true, queue.StateException: true}

// ListTasks implements HistoryStore. The order is created descending, then
// taskId descending; the cursor is "<created ms>|<taskId>".
func (db *DB) ListTasks(ctx context.Context, f TaskFilter, page Page) ([]HistoryTask, string, error) {
	tasks, next, err := listPage(ctx, db, page, func(cursor string) (string, []any, error) {
		return historyQuery(f, cursor, db.dialect.Name == "postgres")
	}, func(row rowScanner) (HistoryTask, error) {
		var (
			t       queue.TaskState
			s       storedTask
			created int64
		)
		if err := row.Scan(append(s.dest(&t), &created)...); err != nil {
			return HistoryTask{}, err
		}
		if err := db.decodeTask(&t, &s); err != nil {
			return HistoryTask{}, err
		}
		return HistoryTask{TaskState: &t, created: created}, nil
	}, func(t HistoryTask) string { return timeCursor(t.created, t.TaskID) })
	if err != nil {
		return nil, "", fmt.Errorf("listing tasks: %w", err)
	}
	return tasks, next, nil
}

// historyQuery builds the SELECT of one page. With a group, a name or no
// state, it walks task_group_members (written once per task) by creation
// time and looks each row's task up; with a resolved state alone it walks
// the partial indexes of resolved tasks, (state, created, task_id) or
// (task_queue_id, state, created, task_id); with an unresolved state it
// reads the unresolved tasks (as many as are queued and running, not the
// history) and sorts them. The choices, and the figures behind them on a
// million tasks, are in docs/history.md.
//
// The name is matched by ILIKE on PostgreSQL, whose planner then estimates
// from the column's statistics how many names match (an expression such
// as LOWER(name) has none, and a guess of a few rows made it read every
// task and sort them rather than walk the index); SQLite's LIKE ignores
// ASCII case itself.
func historyQuery(f TaskFilter, cursor string, postgres bool) (string, []any, error) {
	var (
		from  string
		where []string
		args  []any
		c     string // the table alias whose created and task_id order the rows
	)
	cond := func(expr string, a ...any) {
		where = append(where, expr)
		args = append(args, a...)
	}
	switch {
	case f.TaskGroupID != "" || f.State == "" || f.Name != "":
		from, c = "task_group_members m JOIN tasks t ON t.task_id = m.task_id", "m"
		if f.TaskGroupID != "" {
			cond("m.task_group_id = ?", f.TaskGroupID)
		}
		if f.State != "" {
			cond("t.state = ?", f.State)
		}
		if f.TaskQueueID != "" {
			cond("m.task_queue_id = ?", f.TaskQueueID)
		}
	default:
		from, c = "tasks t", "t"
		if resolvedStates[f.State] {
			cond("t.unresolved = 0")
		} else {
			cond("t.unresolved = 1")
		}
		cond("t.state = ?", f.State)
		if f.TaskQueueID != "" {
			cond("t.task_queue_id = ?", f.TaskQueueID)
		}
	}
	if f.Name != "" {
		like := "LIKE"
		if postgres {
			like = "ILIKE"
		}
		cond(`m.name `+like+` ? ESCAPE '\'`, "%"+likeEscape(f.Name)+"%")
	}
	if !f.CreatedFrom.IsZero() {
		cond(c+".created >= ?", ms(f.CreatedFrom))
	}
	if !f.CreatedTo.IsZero() {
		cond(c+".created < ?", ms(f.CreatedTo))
	}
	if cursor != "" {
		at, id, err := splitCursor(cursor)
		if err != nil {
			return "", nil, err
		}
		cond("("+c+".created, "+c+".task_id) < (?, ?)", at, id)
	} else {
		cond(c + ".created IS NOT NULL")
	}
	return "SELECT " + prefixColumns("t.", taskColumns) + ", " + c + ".created FROM " + from +
		" WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + c + ".created DESC, " + c + ".task_id DESC LIMIT ?", args, nil
}

// likeEscape escapes LIKE's wildcards (and its escape character) in s.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
