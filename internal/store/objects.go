package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
)

// ObjectStore persists the object service's objects (package object holds
// the rules; this only reads and writes rows).
type ObjectStore interface {
	// PutObject runs fn with the object of that name (nil if none) locked
	// and stores what fn returns; an error from fn is returned unchanged
	// and nothing is written.
	PutObject(ctx context.Context, name string, fn func(existing *Object) (*Object, error)) (*Object, error)
	// GetObject returns the object, finished or not, or ErrNotFound.
	GetObject(ctx context.Context, name string) (*Object, error)
	// ExpireObjects deletes up to limit objects whose expiry passed (or,
	// while unfinished, whose upload expiry passed) and returns them, so
	// the caller can delete their data.
	ExpireObjects(ctx context.Context, now time.Time, limit int) ([]Object, error)
}

// Object is an object service record.
type Object struct {
	Name      string
	ProjectID string
	// UploadID is set while the upload is unfinished, "" once finished.
	UploadID      string
	UploadExpires time.Time
	Expires       time.Time
	// Hashes maps an algorithm (sha256, sha512, …) to its lowercase hex
	// value.
	Hashes  map[string]string
	Created time.Time
}

const objectColumns = "name, project_id, upload_id, upload_expires, expires, hashes, created"

// errObjectInsertRaced reports that another transaction created the same
// object between our look-up and our insert.
var errObjectInsertRaced = errors.New("object created concurrently")

func scanObject(r interface{ Scan(...any) error }) (*Object, error) {
	var (
		o                               Object
		uploadExpires, expires, created int64
		hashes                          string
	)
	if err := r.Scan(&o.Name, &o.ProjectID, &o.UploadID, &uploadExpires, &expires, &hashes, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(hashes), &o.Hashes); err != nil {
		return nil, fmt.Errorf("decoding hashes of object %s: %w", o.Name, err)
	}
	if o.Hashes == nil {
		o.Hashes = map[string]string{}
	}
	o.UploadExpires, o.Expires, o.Created = fromMS(uploadExpires), fromMS(expires), fromMS(created)
	return &o, nil
}

// PutObject implements ObjectStore. A first creation that races another
// (both saw no row) is re-run, so fn then sees the winner's row.
func (db *DB) PutObject(ctx context.Context, name string, fn func(existing *Object) (*Object, error)) (*Object, error) {
	var out *Object
	err := retry.Do(ctx, putObjectRetry, func(int) error {
		var err error
		out, err = db.putObject(ctx, name, fn)
		if err != nil && !errors.Is(err, errObjectInsertRaced) {
			return retry.Stop(err)
		}
		return err
	})
	return out, err
}

// putObjectRetry re-runs a raced first creation at once (the winner has
// committed, so the next run sees its row), at most three times.
var putObjectRetry = retry.Policy{
	Attempts: 4,
	Sleep:    func(context.Context, time.Duration) error { return nil },
}

func (db *DB) putObject(ctx context.Context, name string, fn func(existing *Object) (*Object, error)) (*Object, error) {
	var out *Object
	err := db.tx(ctx, func(tx *txn) error {
		existing, err := scanObject(tx.queryRow(ctx, "SELECT "+objectColumns+" FROM objects WHERE name = ?"+db.dialect.LockRow, name))
		if errors.Is(err, sql.ErrNoRows) {
			existing = nil
		} else if err != nil {
			return fmt.Errorf("loading object %s: %w", name, err)
		}
		o, err := fn(existing)
		if err != nil {
			return err
		}
		hashes, err := json.Marshal(o.Hashes)
		if err != nil {
			return fmt.Errorf("encoding hashes of object %s: %w", name, err)
		}
		if o.Hashes == nil {
			hashes = []byte("{}")
		}
		if existing == nil {
			res, err := tx.exec(ctx, "INSERT INTO objects ("+objectColumns+") VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
				name, o.ProjectID, o.UploadID, ms(o.UploadExpires), ms(o.Expires), string(hashes), ms(o.Created))
			if err != nil {
				return fmt.Errorf("creating object %s: %w", name, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return errObjectInsertRaced
			}
		} else {
			_, err := tx.exec(ctx, "UPDATE objects SET project_id = ?, upload_id = ?, upload_expires = ?, expires = ?, hashes = ? WHERE name = ?",
				o.ProjectID, o.UploadID, ms(o.UploadExpires), ms(o.Expires), string(hashes), name)
			if err != nil {
				return fmt.Errorf("updating object %s: %w", name, err)
			}
		}
		o.Name = name
		out = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetObject implements ObjectStore.
func (db *DB) GetObject(ctx context.Context, name string) (*Object, error) {
	o, err := scanObject(db.queryRow(ctx, "SELECT "+objectColumns+" FROM objects WHERE name = ?", name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading object %s: %w", name, err)
	}
	return o, nil
}

// ExpireObjects implements ObjectStore.
func (db *DB) ExpireObjects(ctx context.Context, now time.Time, limit int) ([]Object, error) {
	if limit <= 0 {
		limit = 1000
	}
	var out []Object
	cutoff := ms(now)
	err := db.tx(ctx, func(tx *txn) error {
		out = nil // afresh on every attempt
		var names []any
		for _, q := range []string{
			"SELECT " + objectColumns + " FROM objects WHERE expires < ? ORDER BY expires LIMIT ?" + db.dialect.LockSkip,
			"SELECT " + objectColumns + " FROM objects WHERE upload_id <> '' AND upload_expires < ? ORDER BY upload_expires LIMIT ?" + db.dialect.LockSkip,
		} {
			err := tx.queryEach(ctx, q, []any{cutoff, limit}, func(rows Rows) error {
				for rows.Next() {
					o, err := scanObject(rows)
					if err != nil {
						return err
					}
					if len(out) < limit && !containsName(names, o.Name) {
						out = append(out, *o)
						names = append(names, o.Name)
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("finding expired objects: %w", err)
			}
		}
		for _, n := range names {
			if _, err := tx.exec(ctx, "DELETE FROM objects WHERE name = ?", n); err != nil {
				return fmt.Errorf("deleting expired object %v: %w", n, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func containsName(names []any, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}
