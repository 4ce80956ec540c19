package store

import (
	"context"
	"fmt"
	"time"
)

// CountWorkersSeen returns, per task queue, how many workers asked it for
// work (claimWork) at or after since: the workers of a queue that are
// polling, for the metrics. A worker whose slots are all busy does not
// poll, so busy slots are counted from the running runs instead.
func (db *DB) CountWorkersSeen(ctx context.Context, since time.Time) (map[string]int, error) {
	rows, err := db.query(ctx, "SELECT task_queue_id, COUNT(*) FROM workers WHERE last_date_active >= ? GROUP BY task_queue_id", ms(since))
	if err != nil {
		return nil, fmt.Errorf("counting workers seen: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("counting workers seen: %w", err)
		}
		out[q] = n
	}
	return out, rows.Err()
}
