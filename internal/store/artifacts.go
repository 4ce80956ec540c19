package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ArtifactStore is the queue's artifacts.
type ArtifactStore interface {
	CreateArtifact(ctx context.Context, p CreateArtifactParams) (*Artifact, error)
	GetArtifact(ctx context.Context, taskID string, runID int, name string) (*Artifact, error)
	ListArtifacts(ctx context.Context, taskID string, runID int, page Page) ([]Artifact, string, error)
	MarkArtifactPresent(ctx context.Context, taskID string, runID int, name string) error
}

const artifactColumns = "task_id, run_id, name, storage_type, content_type, details, expires, present"

func scanArtifact(row rowScanner) (*Artifact, error) {
	var (
		a       Artifact
		details string
		expires int64
		present int
	)
	if err := row.Scan(&a.TaskID, &a.RunID, &a.Name, &a.StorageType, &a.ContentType, &details, &expires, &present); err != nil {
		return nil, err
	}
	a.Details, a.Expires, a.Present = []byte(details), fromMS(expires), present != 0
	return &a, nil
}

// CreateArtifact implements Store: with the task row locked (so the run
// cannot be resolved concurrently), Check decides what to store.
func (db *DB) CreateArtifact(ctx context.Context, p CreateArtifactParams) (*Artifact, error) {
	var out *Artifact
	err := db.tx(ctx, func(tx *txn) error {
		task, err := tx.lockTask(ctx, p.TaskID)
		if err != nil {
			return err
		}
		existing, err := scanArtifact(tx.queryRow(ctx, "SELECT "+artifactColumns+" FROM artifacts WHERE task_id = ? AND run_id = ? AND name = ?",
			p.TaskID, p.RunID, p.Name))
		if errors.Is(err, sql.ErrNoRows) {
			existing = nil
		} else if err != nil {
			return fmt.Errorf("loading artifact %s: %w", p.Name, err)
		}
		a, err := p.Check(task, existing)
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx, `INSERT INTO artifacts (`+artifactColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (task_id, run_id, name) DO UPDATE SET storage_type = excluded.storage_type,
			content_type = excluded.content_type, details = excluded.details, expires = excluded.expires, present = excluded.present`,
			p.TaskID, p.RunID, p.Name, a.StorageType, a.ContentType, string(a.Details), ms(a.Expires), boolInt(a.Present))
		if err != nil {
			return fmt.Errorf("storing artifact %s: %w", p.Name, err)
		}
		out = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetArtifact implements Store.
func (db *DB) GetArtifact(ctx context.Context, taskID string, runID int, name string) (*Artifact, error) {
	a, err := scanArtifact(db.queryRow(ctx, "SELECT "+artifactColumns+" FROM artifacts WHERE task_id = ? AND run_id = ? AND name = ?", taskID, runID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading artifact %s: %w", name, err)
	}
	return a, nil
}

// ListArtifacts implements Store: ordered by name.
func (db *DB) ListArtifacts(ctx context.Context, taskID string, runID int, page Page) ([]Artifact, string, error) {
	out, next, err := listPage(ctx, db, page, func(after string) (string, []any, error) {
		return "SELECT " + artifactColumns + " FROM artifacts WHERE task_id = ? AND run_id = ? AND name > ? ORDER BY name LIMIT ?",
			[]any{taskID, runID, after}, nil
	}, func(row rowScanner) (Artifact, error) {
		a, err := scanArtifact(row)
		if err != nil {
			return Artifact{}, err
		}
		return *a, nil
	}, func(a Artifact) string { return a.Name })
	if err != nil {
		return nil, "", fmt.Errorf("listing artifacts: %w", err)
	}
	return out, next, nil
}

// MarkArtifactPresent implements Store.
func (db *DB) MarkArtifactPresent(ctx context.Context, taskID string, runID int, name string) error {
	return db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "UPDATE artifacts SET present = 1 WHERE task_id = ? AND run_id = ? AND name = ?", taskID, runID, name)
		if err != nil {
			return fmt.Errorf("marking artifact %s present: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		return nil
	})
}
