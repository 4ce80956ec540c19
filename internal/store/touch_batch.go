package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// touchBatchRows bounds the rows of one INSERT (7 parameters a worker row;
// SQLite allows 32766 parameters a statement).
const touchBatchRows = 500

// TouchMany implements Store: TouchTaskQueue and TouchWorker for many
// records in one transaction, a few statements in all. A key given twice
// keeps its latest time. Rows are written in key order, so that two
// processes flushing overlapping batches lock them in the same order.
func (db *DB) TouchMany(ctx context.Context, queues []TouchTaskQueueParams, workers []TouchWorkerParams, recent []RecentTasksParams) error {
	queues = latestQueues(queues)
	workers = latestWorkers(workers)
	recent = recentByWorker(recent)
	if len(queues) == 0 && len(workers) == 0 && len(recent) == 0 {
		return nil
	}
	return db.tx(ctx, func(tx *txn) error {
		for chunk := range slices.Chunk(queues, touchBatchRows) {
			args := make([]any, 0, 5*len(chunk))
			rows := make([]string, len(chunk))
			for i, q := range chunk {
				rows[i] = "(?, '', 'experimental', ?, ?)"
				args = append(args, q.TaskQueueID, ms(q.Expires), ms(q.Now))
			}
			tx.send(Statement{Query: db.q(`INSERT INTO task_queues (task_queue_id, description, stability, expires, last_date_active)
				VALUES ` + strings.Join(rows, ", ") + ` ON CONFLICT (task_queue_id) DO UPDATE SET
				expires = CASE WHEN excluded.expires > task_queues.expires THEN excluded.expires ELSE task_queues.expires END,
				last_date_active = CASE WHEN excluded.last_date_active > task_queues.last_date_active THEN excluded.last_date_active ELSE task_queues.last_date_active END`),
				Args: args, What: fmt.Sprintf("recording %d task queues", len(chunk))})
		}
		for chunk := range slices.Chunk(workers, touchBatchRows) {
			args := make([]any, 0, 7*len(chunk)+1)
			rows := make([]string, len(chunk))
			for i, w := range chunk {
				rows[i] = "(?, ?, ?, ?, ?, ?, 0, '[]', '[]', ?)"
				args = append(args, w.Key.TaskQueueID, w.Key.WorkerGroup, w.Key.WorkerID, ms(w.Now), ms(w.Now), ms(w.Expires), max(w.Capacity, 0))
			}
			args = append(args, WorkerCapacityAbsence.Milliseconds())
			tx.send(Statement{Query: db.q(`INSERT INTO workers (` + workerColumns + `)
				VALUES ` + strings.Join(rows, ", ") + ` ON CONFLICT (task_queue_id, worker_group, worker_id) DO UPDATE SET
				expires = CASE WHEN excluded.expires > workers.expires THEN excluded.expires ELSE workers.expires END,
				last_date_active = CASE WHEN excluded.last_date_active > workers.last_date_active THEN excluded.last_date_active ELSE workers.last_date_active END,
				` + capacityUpdate),
				Args: args, What: fmt.Sprintf("recording %d workers", len(chunk))})
		}
		if err := tx.flush(ctx); err != nil {
			return err
		}
		// After the workers' records: a worker's first claim comes with
		// its first touch. In key order, as the rows above, so that two
		// processes lock the same records in the same order.
		for _, r := range recent {
			if err := tx.addRecentTasks(ctx, r.Key, r.Tasks); err != nil {
				return err
			}
		}
		return nil
	})
}

// recentByWorker joins the runs given for the same worker, in the order
// given, and sorts the workers by key.
func recentByWorker(in []RecentTasksParams) []RecentTasksParams {
	var out []RecentTasksParams
	at := map[WorkerKey]int{}
	for _, r := range in {
		if len(r.Tasks) == 0 {
			continue
		}
		if i, ok := at[r.Key]; ok {
			out[i].Tasks = append(out[i].Tasks, r.Tasks...)
			continue
		}
		at[r.Key] = len(out)
		out = append(out, RecentTasksParams{Key: r.Key, Tasks: slices.Clone(r.Tasks)})
	}
	slices.SortFunc(out, func(a, b RecentTasksParams) int { return cmp.Compare(workerSortKey(a.Key), workerSortKey(b.Key)) })
	return out
}

// latestQueues keeps one entry per task queue, the latest, in id order.
func latestQueues(in []TouchTaskQueueParams) []TouchTaskQueueParams {
	return latest(in, func(p TouchTaskQueueParams) string { return p.TaskQueueID },
		func(a, b TouchTaskQueueParams) bool { return b.Now.After(a.Now) || b.Expires.After(a.Expires) })
}

// latestWorkers keeps one entry per worker, the latest, in key order,
// with the largest capacity asked among its entries.
func latestWorkers(in []TouchWorkerParams) []TouchWorkerParams {
	asked := map[WorkerKey]int{}
	for _, p := range in {
		asked[p.Key] = max(asked[p.Key], p.Capacity)
	}
	out := latest(in, func(p TouchWorkerParams) string { return workerSortKey(p.Key) },
		func(a, b TouchWorkerParams) bool { return b.Now.After(a.Now) || b.Expires.After(a.Expires) })
	for i := range out {
		out[i].Capacity = asked[out[i].Key]
	}
	return out
}

// workerSortKey orders workers' records as every batch writes them.
func workerSortKey(k WorkerKey) string {
	return k.TaskQueueID + "\x00" + k.WorkerGroup + "\x00" + k.WorkerID
}

// latest sorts by key and keeps, of equal keys, the entry newer wins for.
func latest[T any](in []T, key func(T) string, newer func(old, candidate T) bool) []T {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	kept := out[:0]
	for _, p := range out {
		if n := len(kept); n > 0 && key(kept[n-1]) == key(p) {
			if newer(kept[n-1], p) {
				kept[n-1] = p
			}
			continue
		}
		kept = append(kept, p)
	}
	return kept
}
