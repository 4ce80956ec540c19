package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/index"
	"github.com/hopper-ci/hopper/internal/queue"
)

// IndexStore persists the Index service's entries and namespaces. Entries
// of completed tasks are also written by UpdateTask, in the transaction
// that resolves the task (see indexCompleted), so no completed task is
// ever missing from the index, whichever process crashes when.
type IndexStore interface {
	// InsertIndexedTask stores e at its path unless an unexpired entry of
	// higher rank is there at now (index.Replaces), extending its
	// namespaces' expiry, and returns the entry found at the path
	// afterwards.
	InsertIndexedTask(ctx context.Context, e index.Entry, now time.Time) (*index.Entry, error)
	// GetIndexedTask returns the entry at namespace.name unless it expired
	// before now; ErrNotFound otherwise.
	GetIndexedTask(ctx context.Context, namespace, name string, now time.Time) (*index.Entry, error)
	// FindIndexedTasks returns the unexpired entries at the given paths,
	// in the order of paths, skipping paths with none.
	FindIndexedTasks(ctx context.Context, paths []string, now time.Time) ([]index.Entry, error)
	// ListIndexedTasks lists the unexpired entries directly in namespace,
	// by name.
	ListIndexedTasks(ctx context.Context, namespace string, now time.Time, page Page) ([]index.Entry, string, error)
	// ListIndexNamespaces lists the unexpired namespaces directly under
	// parent, by name.
	ListIndexNamespaces(ctx context.Context, parent string, now time.Time, page Page) ([]index.Namespace, string, error)
	// DeleteIndexedTask removes the entry at namespace.name (if any); its
	// namespaces stay until they expire.
	DeleteIndexedTask(ctx context.Context, namespace, name string) error
	// ExpireIndex deletes the entries and the namespaces whose expiry
	// passed before now; it says how many of each.
	ExpireIndex(ctx context.Context, now time.Time) (entries, namespaces int, err error)
	// IndexedTaskPaths returns the unexpired entries holding taskID, by
	// path (at most 1000): where a task can be found now.
	IndexedTaskPaths(ctx context.Context, taskID string, now time.Time) ([]index.Entry, error)
}

const indexEntryColumns = "namespace, name, rank, task_id, data, expires"

func scanIndexEntry(row rowScanner) (*index.Entry, error) {
	var (
		e       index.Entry
		data    string
		expires int64
	)
	if err := row.Scan(&e.Namespace, &e.Name, &e.Rank, &e.TaskID, &data, &expires); err != nil {
		return nil, err
	}
	e.Data, e.Expires = []byte(data), fromMS(expires)
	return &e, nil
}

// sendIndexInsert queues the statements storing entries: each entry
// replaces the one at its path unless that one has a higher rank and has
// not expired by now (index.Replaces), and the
// namespaces above an entry that is now stored are created or have their
// expiry extended. Entries first, then namespaces, each in path order, so
// concurrent transactions lock rows in one global order.
func (t *txn) sendIndexInsert(entries []index.Entry, now time.Time) {
	for _, e := range entries {
		data := string(e.Data)
		if data == "" {
			data = "{}"
		}
		t.send(Statement{
			Query: "INSERT INTO index_tasks (" + indexEntryColumns + `) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (namespace, name) DO UPDATE SET rank = excluded.rank, task_id = excluded.task_id,
			data = excluded.data, expires = excluded.expires WHERE index_tasks.rank <= excluded.rank OR index_tasks.expires <= ?`,
			Args: []any{e.Namespace, e.Name, e.Rank, e.TaskID, data, ms(e.Expires), ms(now)},
			What: "indexing task " + e.TaskID + " at " + e.Path(),
		})
	}
	for _, e := range entries {
		refs := index.Ancestors(e.Namespace)
		if len(refs) == 0 {
			continue
		}
		expires := ms(index.NamespaceExpiry(e.Expires))
		rows := make([]string, len(refs))
		args := make([]any, 0, 3*len(refs)+3)
		for i, r := range refs {
			rows[i] = "SELECT ? AS parent, ? AS name, CAST(? AS BIGINT) AS expires"
			args = append(args, r.Parent, r.Name, expires)
		}
		args = append(args, e.Namespace, e.Name, e.TaskID)
		// Only if the entry is now this task's: an insert of lower rank
		// changes nothing, its namespaces included.
		t.send(Statement{
			Query: "INSERT INTO index_namespaces (parent, name, expires) SELECT v.parent, v.name, v.expires FROM (" +
				strings.Join(rows, " UNION ALL ") + `) v
			WHERE EXISTS (SELECT 1 FROM index_tasks WHERE namespace = ? AND name = ? AND task_id = ?)
			ON CONFLICT (parent, name) DO UPDATE SET expires = excluded.expires WHERE index_namespaces.expires < excluded.expires`,
			Args: args,
			What: "creating the namespaces of " + e.Path(),
		})
	}
}

// indexCompleted queues the index entries of the tasks a transaction
// resolved completed (routes index.<path>). A task without such a route
// costs a scan of its routes and nothing else. now is the resolution's time.
func (t *txn) indexCompleted(tasks []*queue.TaskState, now time.Time) {
	var entries []index.Entry
	for _, task := range tasks {
		if task.State() != queue.StateCompleted {
			continue
		}
		entries = append(entries, index.ForCompletedTask(task.TaskID, &task.Task)...)
	}
	if len(entries) == 0 {
		return
	}
	sortEntries(entries)
	t.sendIndexInsert(entries, now)
}

// sortEntries orders entries by path (stable, so of two tasks indexed at
// one path in one transaction the later one is inserted last and, at
// equal rank, wins).
func sortEntries(entries []index.Entry) {
	slices.SortStableFunc(entries, func(a, b index.Entry) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// InsertIndexedTask implements IndexStore.
func (db *DB) InsertIndexedTask(ctx context.Context, e index.Entry, now time.Time) (*index.Entry, error) {
	var out *index.Entry
	err := db.tx(ctx, func(tx *txn) error {
		tx.sendIndexInsert([]index.Entry{e}, now)
		var err error
		out, err = scanIndexEntry(tx.queryRow(ctx, "SELECT "+indexEntryColumns+" FROM index_tasks WHERE namespace = ? AND name = ?", e.Namespace, e.Name))
		if err != nil {
			return fmt.Errorf("reading the entry at %s: %w", e.Path(), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetIndexedTask implements IndexStore.
func (db *DB) GetIndexedTask(ctx context.Context, namespace, name string, now time.Time) (*index.Entry, error) {
	e, err := scanIndexEntry(db.queryRow(ctx, "SELECT "+indexEntryColumns+" FROM index_tasks WHERE namespace = ? AND name = ? AND expires > ?",
		namespace, name, ms(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("finding the entry at %s: %w", index.Join(namespace, name), err)
	}
	return e, nil
}

// FindIndexedTasks implements IndexStore.
func (db *DB) FindIndexedTasks(ctx context.Context, paths []string, now time.Time) ([]index.Entry, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	conds := make([]string, len(paths))
	args := make([]any, 0, 2*len(paths)+1)
	for i, p := range paths {
		ns, name := index.Split(p)
		conds[i] = "(namespace = ? AND name = ?)"
		args = append(args, ns, name)
	}
	args = append(args, ms(now))
	rows, err := db.query(ctx, "SELECT "+indexEntryColumns+" FROM index_tasks WHERE ("+strings.Join(conds, " OR ")+") AND expires > ?", args...)
	if err != nil {
		return nil, fmt.Errorf("finding %d index paths: %w", len(paths), err)
	}
	defer rows.Close()
	found := map[string]*index.Entry{}
	for rows.Next() {
		e, err := scanIndexEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("reading an index entry: %w", err)
		}
		found[e.Path()] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finding %d index paths: %w", len(paths), err)
	}
	var out []index.Entry
	for _, p := range paths {
		if e := found[p]; e != nil {
			out = append(out, *e)
			delete(found, p) // a path asked twice is answered once
		}
	}
	return out, nil
}

// ListIndexedTasks implements IndexStore.
func (db *DB) ListIndexedTasks(ctx context.Context, namespace string, now time.Time, page Page) ([]index.Entry, string, error) {
	out, next, err := listPage(ctx, db, page,
		func(cursor string) (string, []any, error) {
			return "SELECT " + indexEntryColumns + " FROM index_tasks WHERE namespace = ? AND name > ? AND expires > ? ORDER BY name LIMIT ?",
				[]any{namespace, cursor, ms(now)}, nil
		},
		func(row rowScanner) (index.Entry, error) {
			e, err := scanIndexEntry(row)
			if err != nil {
				return index.Entry{}, err
			}
			return *e, nil
		},
		func(e index.Entry) string { return e.Name })
	if err != nil {
		return nil, "", fmt.Errorf("listing the entries of namespace %q: %w", namespace, err)
	}
	return out, next, nil
}

// ListIndexNamespaces implements IndexStore.
func (db *DB) ListIndexNamespaces(ctx context.Context, parent string, now time.Time, page Page) ([]index.Namespace, string, error) {
	out, next, err := listPage(ctx, db, page,
		func(cursor string) (string, []any, error) {
			return "SELECT parent, name, expires FROM index_namespaces WHERE parent = ? AND name > ? AND expires > ? ORDER BY name LIMIT ?",
				[]any{parent, cursor, ms(now)}, nil
		},
		func(row rowScanner) (index.Namespace, error) {
			var n index.Namespace
			var expires int64
			err := row.Scan(&n.Parent, &n.Name, &expires)
			n.Expires = fromMS(expires)
			return n, err
		},
		func(n index.Namespace) string { return n.Name })
	if err != nil {
		return nil, "", fmt.Errorf("listing the namespaces under %q: %w", parent, err)
	}
	return out, next, nil
}

// maxPathsOfTask bounds IndexedTaskPaths: a task has at most as many
// entries as routes, which createTask caps far lower.
const maxPathsOfTask = 1000

// IndexedTaskPaths implements IndexStore.
func (db *DB) IndexedTaskPaths(ctx context.Context, taskID string, now time.Time) ([]index.Entry, error) {
	rows, err := db.query(ctx, "SELECT "+indexEntryColumns+" FROM index_tasks WHERE task_id = ? AND expires > ? ORDER BY namespace, name LIMIT ?",
		taskID, ms(now), maxPathsOfTask)
	if err != nil {
		return nil, fmt.Errorf("finding where task %s is indexed: %w", taskID, err)
	}
	defer rows.Close()
	var out []index.Entry
	for rows.Next() {
		e, err := scanIndexEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("finding where task %s is indexed: %w", taskID, err)
		}
		out = append(out, *e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finding where task %s is indexed: %w", taskID, err)
	}
	return out, nil
}

// DeleteIndexedTask implements IndexStore.
func (db *DB) DeleteIndexedTask(ctx context.Context, namespace, name string) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, "DELETE FROM index_tasks WHERE namespace = ? AND name = ?", namespace, name); err != nil {
			return fmt.Errorf("deleting the entry at %s: %w", index.Join(namespace, name), err)
		}
		return nil
	})
}

// ExpireIndex implements IndexStore.
func (db *DB) ExpireIndex(ctx context.Context, now time.Time) (entries, namespaces int, err error) {
	err = db.expireRows(ctx, "the index", func() []expireStep {
		return []expireStep{
			{&entries, "DELETE FROM index_tasks WHERE expires < ?", []any{ms(now)}},
			{&namespaces, "DELETE FROM index_namespaces WHERE expires < ?", []any{ms(now)}},
		}
	})
	return entries, namespaces, err
}
