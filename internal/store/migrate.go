package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migration is one numbered schema change, read from NNN_name.up.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads NNN_name.up.sql files from dir of fsys, in order.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".up.sql") {
			continue
		}
		num, rest, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s is not named NNN_name.up.sql", name)
		}
		body, err := fs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(rest, ".up.sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations numbered %d", out[i].Version)
		}
	}
	return out, nil
}

// Migrate applies the migrations not yet recorded in schema_migrations, each
// in its own transaction. lock, if set, is called first in every transaction
// to serialise concurrent migrators (several replicas starting at once).
func Migrate(ctx context.Context, db *sql.DB, d Dialect, migrations []Migration, lock func(context.Context, *sql.Tx) error) ([]Migration, error) {
	if err := createMigrationsTable(ctx, db, lock); err != nil {
		return nil, err
	}
	var applied []Migration
	for _, m := range migrations {
		done, err := applyMigration(ctx, db, d, m, lock)
		if err != nil {
			return applied, err
		}
		if done {
			applied = append(applied, m)
		}
	}
	return applied, nil
}

// createMigrationsTable creates schema_migrations under the lock: two
// PostgreSQL sessions running CREATE TABLE IF NOT EXISTS at once on a
// fresh database may both try to create it, and the loser fails with a
// duplicate key in pg_type instead of finding the table there.
func createMigrationsTable(ctx context.Context, db *sql.DB, lock func(context.Context, *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning to create schema_migrations: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if lock != nil {
		if err := lock(ctx, tx); err != nil {
			return fmt.Errorf("locking to create schema_migrations: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing schema_migrations: %w", err)
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, d Dialect, m Migration, lock func(context.Context, *sql.Tx) error) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("beginning migration %d: %w", m.Version, err)
	}
	defer func() { _ = tx.Rollback() }()
	if lock != nil {
		if err := lock(ctx, tx); err != nil {
			return false, fmt.Errorf("locking for migration %d: %w", m.Version, err)
		}
	}
	q := "SELECT COUNT(*) FROM schema_migrations WHERE version = ?"
	if d.Numbered {
		q = "SELECT COUNT(*) FROM schema_migrations WHERE version = $1"
	}
	var n int
	if err := tx.QueryRowContext(ctx, q, m.Version).Scan(&n); err != nil {
		return false, fmt.Errorf("checking migration %d: %w", m.Version, err)
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("applying migration %d_%s: %w", m.Version, m.Name, err)
	}
	ins := "INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)"
	if d.Numbered {
		ins = "INSERT INTO schema_migrations (version, name, applied) VALUES ($1, $2, $3)"
	}
	if _, err := tx.ExecContext(ctx, ins, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("recording migration %d: %w", m.Version, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("committing migration %d: %w", m.Version, err)
	}
	return true, nil
}
