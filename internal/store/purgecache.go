package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/purgecache"
)

// PurgeCacheStore persists the purge-cache service's requests (package
// purgecache holds the rules).
type PurgeCacheStore interface {
	// PutPurgeRequest records a request to purge a cache of a worker pool;
	// a newer request replaces an older one (before and expires never move
	// backwards).
	PutPurgeRequest(ctx context.Context, r purgecache.Request) error
	// ListPurgeRequests lists requests ordered by worker pool and cache
	// name: of one worker pool, or of all when workerPoolID is "".
	ListPurgeRequests(ctx context.Context, workerPoolID string, page Page) ([]purgecache.Request, string, error)
	// ExpirePurgeRequests deletes requests whose expiry passed and says how
	// many.
	ExpirePurgeRequests(ctx context.Context, now time.Time) (int, error)
}

// PutPurgeRequest implements PurgeCacheStore.
func (db *DB) PutPurgeRequest(ctx context.Context, r purgecache.Request) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, `INSERT INTO purge_cache_requests (worker_pool_id, cache_name, purge_before, expires) VALUES (?, ?, ?, ?)
			ON CONFLICT (worker_pool_id, cache_name) DO UPDATE SET
			purge_before = CASE WHEN excluded.purge_before > purge_cache_requests.purge_before THEN excluded.purge_before ELSE purge_cache_requests.purge_before END,
			expires = CASE WHEN excluded.expires > purge_cache_requests.expires THEN excluded.expires ELSE purge_cache_requests.expires END`,
			r.WorkerPoolID, r.CacheName, ms(r.Before), ms(r.Expires))
		if err != nil {
			return fmt.Errorf("recording purge request for %s/%s: %w", r.WorkerPoolID, r.CacheName, err)
		}
		return nil
	})
}

// ListPurgeRequests implements PurgeCacheStore. The continuation token is
// the last (worker pool, cache) pair of the page.
func (db *DB) ListPurgeRequests(ctx context.Context, workerPoolID string, page Page) ([]purgecache.Request, string, error) {
	out, next, err := listPageFields(ctx, db, page, 2, func(after string) (string, []any, error) {
		afterPool, afterCache := splitPurgeCursor(after)
		query := `SELECT worker_pool_id, cache_name, purge_before, expires FROM purge_cache_requests
		WHERE (worker_pool_id > ? OR (worker_pool_id = ? AND cache_name > ?))`
		args := []any{afterPool, afterPool, afterCache}
		if workerPoolID != "" {
			query += " AND worker_pool_id = ?"
			args = append(args, workerPoolID)
		}
		return query + " ORDER BY worker_pool_id, cache_name LIMIT ?", args, nil
	}, func(row rowScanner) (purgecache.Request, error) {
		var (
			r               purgecache.Request
			before, expires int64
		)
		if err := row.Scan(&r.WorkerPoolID, &r.CacheName, &before, &expires); err != nil {
			return purgecache.Request{}, err
		}
		r.Before, r.Expires = fromMS(before), fromMS(expires)
		return r, nil
	}, func(r purgecache.Request) string { return r.WorkerPoolID + "\x00" + r.CacheName })
	if err != nil {
		return nil, "", fmt.Errorf("listing purge requests: %w", err)
	}
	return out, next, nil
}

func splitPurgeCursor(c string) (pool, cache string) {
	for i := 0; i < len(c); i++ {
		if c[i] == 0 {
			return c[:i], c[i+1:]
		}
	}
	return c, ""
}

// ExpirePurgeRequests implements PurgeCacheStore.
func (db *DB) ExpirePurgeRequests(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "DELETE FROM purge_cache_requests WHERE expires < ?", ms(now))
		if err != nil {
			return fmt.Errorf("expiring purge requests: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}
