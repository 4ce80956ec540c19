package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/secrets"
)

// SecretStore persists the Secrets service's values, sealed: the store
// never sees a secret in plain text.
type SecretStore interface {
	// PutSecret creates or replaces a secret; created says which.
	PutSecret(ctx context.Context, s *secrets.Secret) (created bool, err error)
	// GetSecret returns a secret, expired or not; ErrNotFound if none.
	GetSecret(ctx context.Context, name string) (*secrets.Secret, error)
	// ListSecrets lists the names of the secrets readable at now, by name.
	ListSecrets(ctx context.Context, now time.Time, page Page) ([]string, string, error)
	// DeleteSecret removes a secret; removing a missing one is no error.
	DeleteSecret(ctx context.Context, name string) error
	// ExpireSecrets deletes the secrets whose expiry passed before now; it
	// says how many.
	ExpireSecrets(ctx context.Context, now time.Time) (int, error)
}

// PutSecret implements SecretStore.
func (db *DB) PutSecret(ctx context.Context, s *secrets.Secret) (bool, error) {
	created := false
	err := db.tx(ctx, func(tx *txn) error {
		var n int
		if err := tx.queryRow(ctx, "SELECT COUNT(*) FROM secrets WHERE name = ?", s.Name).Scan(&n); err != nil {
			return fmt.Errorf("looking up secret %q: %w", s.Name, err)
		}
		created = n == 0
		_, err := tx.exec(ctx, `INSERT INTO secrets (name, sealed, expires) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, expires = excluded.expires`, s.Name, s.Sealed, ms(s.Expires))
		if err != nil {
			return fmt.Errorf("storing secret %q: %w", s.Name, err)
		}
		return nil
	})
	return created, err
}

// GetSecret implements SecretStore.
func (db *DB) GetSecret(ctx context.Context, name string) (*secrets.Secret, error) {
	s := secrets.Secret{Name: name}
	var expires int64
	err := db.queryRow(ctx, "SELECT sealed, expires FROM secrets WHERE name = ?", name).Scan(&s.Sealed, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading secret %q: %w", name, err)
	}
	s.Expires = fromMS(expires)
	return &s, nil
}

// ListSecrets implements SecretStore.
func (db *DB) ListSecrets(ctx context.Context, now time.Time, page Page) ([]string, string, error) {
	out, next, err := listPage(ctx, db, page,
		func(cursor string) (string, []any, error) {
			return "SELECT name FROM secrets WHERE name > ? AND expires >= ? ORDER BY name LIMIT ?", []any{cursor, ms(now)}, nil
		},
		func(row rowScanner) (string, error) {
			var name string
			err := row.Scan(&name)
			return name, err
		},
		func(name string) string { return name })
	if err != nil {
		return nil, "", fmt.Errorf("listing secrets: %w", err)
	}
	return out, next, nil
}

// DeleteSecret implements SecretStore.
func (db *DB) DeleteSecret(ctx context.Context, name string) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, "DELETE FROM secrets WHERE name = ?", name); err != nil {
			return fmt.Errorf("deleting secret %q: %w", name, err)
		}
		return nil
	})
}

// ExpireSecrets implements SecretStore.
func (db *DB) ExpireSecrets(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := db.expireRows(ctx, "secrets", func() []expireStep {
		return []expireStep{{&n, "DELETE FROM secrets WHERE expires < ?", []any{ms(now)}}}
	})
	return n, err
}
