package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// EndpointStore is the directory of where long-lived connections are held
// when several replicas share the database: a worker's websocktunnel
// session or its interactive agent is held by the replica it connected to,
// and a viewer on another replica looks the holder up here to reach it.
// Each row is a lease the holder renews; a replica that died leaves rows
// that run out.
type EndpointStore interface {
	// PutEndpoint records that replicaURL holds key until expires; a newer
	// registration (the worker connected again, maybe elsewhere) replaces
	// it.
	PutEndpoint(ctx context.Context, key, replicaURL string, expires time.Time) error
	// GetEndpoint returns the replica holding key at now; ErrNotFound when
	// no replica does (never recorded, released, or run out).
	GetEndpoint(ctx context.Context, key string, now time.Time) (string, error)
	// DeleteEndpoint releases key if replicaURL still holds it (a newer
	// holder's row stays).
	DeleteEndpoint(ctx context.Context, key, replicaURL string) error
	// ExpireEndpoints deletes the rows run out at now and says how many.
	ExpireEndpoints(ctx context.Context, now time.Time) (int, error)
}

// PutEndpoint implements EndpointStore.
func (db *DB) PutEndpoint(ctx context.Context, key, replicaURL string, expires time.Time) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, `INSERT INTO replica_endpoints (endpoint_key, replica_url, expires) VALUES (?, ?, ?)
			ON CONFLICT (endpoint_key) DO UPDATE SET replica_url = excluded.replica_url, expires = excluded.expires`,
			key, replicaURL, ms(expires))
		if err != nil {
			return fmt.Errorf("recording endpoint %s: %w", key, err)
		}
		return nil
	})
}

// GetEndpoint implements EndpointStore.
func (db *DB) GetEndpoint(ctx context.Context, key string, now time.Time) (string, error) {
	var url string
	err := db.queryRow(ctx, `SELECT replica_url FROM replica_endpoints WHERE endpoint_key = ? AND expires > ?`, key, ms(now)).Scan(&url)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading endpoint %s: %w", key, err)
	}
	return url, nil
}

// DeleteEndpoint implements EndpointStore.
func (db *DB) DeleteEndpoint(ctx context.Context, key, replicaURL string) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, `DELETE FROM replica_endpoints WHERE endpoint_key = ? AND replica_url = ?`, key, replicaURL); err != nil {
			return fmt.Errorf("releasing endpoint %s: %w", key, err)
		}
		return nil
	})
}

// ExpireEndpoints implements EndpointStore.
func (db *DB) ExpireEndpoints(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, `DELETE FROM replica_endpoints WHERE expires <= ?`, ms(now))
		if err != nil {
			return err
		}
		c, err := res.RowsAffected()
		n = int(c)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expiring endpoints: %w", err)
	}
	return n, nil
}
