// Package sqlite is hopper's embedded store driver: a single SQLite file,
// no setup, written through one connection so writers never contend.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/hopper-ci/hopper/internal/store"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Dialect is SQLite's flavour of SQL. SQLite serialises writers, and hopper
// writes through a single connection, so no row locks are needed.
var Dialect = store.Dialect{
	Name: "sqlite",
	RunField: func(runID, field string) string {
		return "json_extract(runs, '$[' || " + runID + " || '].' || '" + field + "')"
	},
	// The WHERE lets SQLite answer MAX from the partial index on
	// pending_seq instead of scanning every task.
	NextPendingSeq: "(SELECT COALESCE(MAX(pending_seq), 0) + 1 FROM tasks WHERE pending_seq IS NOT NULL)",
	// The maximum may be read once for the whole statement, so each row
	// adds its ordinal to it.
	PendingSeqs: func(ordinal string) string {
		return "(SELECT COALESCE(MAX(pending_seq), 0) FROM tasks WHERE pending_seq IS NOT NULL) + " + ordinal
	},
	// One writer connection: calls that queue behind it share its next
	// transaction.
	Batches: 1,
}

// Migrations returns the embedded schema migrations.
func Migrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationsFS, "migrations")
}

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(on)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the database file at path and applies the
// migrations.
func Open(ctx context.Context, path string) (*store.DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	if err := makePrivate(path); err != nil {
		return nil, err
	}
	write, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// One writer connection: SQLite allows one writer at a time anyway,
	// and queueing in Go is cheaper than busy-waiting in SQLite.
	write.SetMaxOpenConns(1)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := MigrateDB(ctx, write); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("opening %s for reading: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	return store.New(Dialect, write, read, nil), nil
}

// makePrivate creates the database file 0600 (whatever the umask) or makes
// an existing one 0600: it holds every client's access token. SQLite gives
// the WAL, journal and shared-memory files the database file's mode, so
// they follow; those an older build left are made private too.
func makePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	err = f.Chmod(0o600)
	f.Close()
	if err != nil {
		return fmt.Errorf("making %s private: %w", path, err)
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Chmod(path+suffix, 0o600); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("making %s private: %w", path+suffix, err)
		}
	}
	return nil
}

// MigrateDB applies the embedded migrations to an open database.
func MigrateDB(ctx context.Context, db *sql.DB) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	if _, err := store.Migrate(ctx, db, Dialect, ms, nil); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	return nil
}
