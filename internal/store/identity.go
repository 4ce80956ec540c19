package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// IdentityStore persists what hopper needs to vouch for tasks as an OpenID
// issuer (docs/identity.md): the keys identity tokens are signed with,
// sealed with the server key, and what the forge integration says about
// the tasks it created (the forge claims of their tokens).
type IdentityStore interface {
	// ListSigningKeys returns every stored key, oldest generation first.
	ListSigningKeys(ctx context.Context) ([]SigningKey, error)
	// AddSigningKey stores k as generation k.Generation unless a key of
	// that generation exists; it reports whether k was stored. Replicas
	// racing to add the next generation all end up with the one key
	// that won.
	AddSigningKey(ctx context.Context, k *SigningKey) (bool, error)
	// ExpireSigningKeys deletes the keys whose successor began signing
	// before cutoff (no token they signed is still valid); it says how
	// many.
	ExpireSigningKeys(ctx context.Context, cutoff time.Time) (int, error)

	// PutTaskIdentity records what the forge integration vouches for
	// about a task it creates, before creating it; an existing record of
	// the task is kept (a redelivery records the same).
	PutTaskIdentity(ctx context.Context, id *TaskIdentity) error
	// GetTaskIdentity returns a task's record; ErrNotFound if none.
	GetTaskIdentity(ctx context.Context, taskID string) (*TaskIdentity, error)
	// DeleteTaskIdentity removes a task's record (its creation was
	// refused); removing a missing one is no error.
	DeleteTaskIdentity(ctx context.Context, taskID string) error
	// ExpireTaskIdentities deletes the records that expired before now.
	ExpireTaskIdentities(ctx context.Context, now time.Time) (int, error)
}

// SigningKey is a stored token signing key. Sealed is the private key
// (PKCS#8, base64) sealed with the server key and the KeyID as associated
// data. Activates is when it starts signing: later than Created by the
// publication lead, so verifiers can fetch it before they meet it.
type SigningKey struct {
	Generation         int64
	KeyID              string
	Algorithm          string
	Sealed             string
	Created, Activates time.Time
}

// TaskIdentity is what the forge integration vouches for about a task:
// Claims is the JSON object of forge claims its tokens carry. It expires
// with the task.
type TaskIdentity struct {
	TaskID  string
	Claims  string
	Expires time.Time
}

// ListSigningKeys implements IdentityStore.
func (db *DB) ListSigningKeys(ctx context.Context) ([]SigningKey, error) {
	rows, err := db.query(ctx, "SELECT generation, key_id, algorithm, sealed, created, activates FROM signing_keys ORDER BY generation")
	if err != nil {
		return nil, fmt.Errorf("listing signing keys: %w", err)
	}
	defer rows.Close()
	var out []SigningKey
	for rows.Next() {
		var k SigningKey
		var created, activates int64
		if err := rows.Scan(&k.Generation, &k.KeyID, &k.Algorithm, &k.Sealed, &created, &activates); err != nil {
			return nil, fmt.Errorf("reading a signing key: %w", err)
		}
		k.Created, k.Activates = fromMS(created), fromMS(activates)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing signing keys: %w", err)
	}
	return out, nil
}

// AddSigningKey implements IdentityStore. The generation is the primary
// key, so of two replicas adding the same generation one inserts and the
// other's insert does nothing, whichever commits first.
func (db *DB) AddSigningKey(ctx context.Context, k *SigningKey) (bool, error) {
	added := false
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, `INSERT INTO signing_keys (generation, key_id, algorithm, sealed, created, activates)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (generation) DO NOTHING`,
			k.Generation, k.KeyID, k.Algorithm, k.Sealed, ms(k.Created), ms(k.Activates))
		if err != nil {
			return fmt.Errorf("adding signing key generation %d: %w", k.Generation, err)
		}
		n, _ := res.RowsAffected()
		added = n == 1
		return nil
	})
	return added, err
}

// ExpireSigningKeys implements IdentityStore.
func (db *DB) ExpireSigningKeys(ctx context.Context, cutoff time.Time) (int, error) {
	var n int
	err := db.expireRows(ctx, "signing keys", func() []expireStep {
		return []expireStep{{&n, `DELETE FROM signing_keys WHERE EXISTS (SELECT 1 FROM signing_keys later
			WHERE later.generation > signing_keys.generation AND later.activates < ?)`, []any{ms(cutoff)}}}
	})
	return n, err
}

// PutTaskIdentity implements IdentityStore.
func (db *DB) PutTaskIdentity(ctx context.Context, id *TaskIdentity) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, `INSERT INTO task_identities (task_id, claims, expires) VALUES (?, ?, ?)
			ON CONFLICT (task_id) DO NOTHING`, id.TaskID, id.Claims, ms(id.Expires)); err != nil {
			return fmt.Errorf("recording the identity of task %s: %w", id.TaskID, err)
		}
		return nil
	})
}

// GetTaskIdentity implements IdentityStore.
func (db *DB) GetTaskIdentity(ctx context.Context, taskID string) (*TaskIdentity, error) {
	id := TaskIdentity{TaskID: taskID}
	var expires int64
	err := db.queryRow(ctx, "SELECT claims, expires FROM task_identities WHERE task_id = ?", taskID).Scan(&id.Claims, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading the identity of task %s: %w", taskID, err)
	}
	id.Expires = fromMS(expires)
	return &id, nil
}

// DeleteTaskIdentity implements IdentityStore.
func (db *DB) DeleteTaskIdentity(ctx context.Context, taskID string) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, "DELETE FROM task_identities WHERE task_id = ?", taskID); err != nil {
			return fmt.Errorf("deleting the identity of task %s: %w", taskID, err)
		}
		return nil
	})
}

// ExpireTaskIdentities implements IdentityStore.
func (db *DB) ExpireTaskIdentities(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := db.expireRows(ctx, "task identities", func() []expireStep {
		return []expireStep{{&n, "DELETE FROM task_identities WHERE expires < ?", []any{ms(now)}}}
	})
	return n, err
}
