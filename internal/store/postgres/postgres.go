// Package postgres is hopper's production store driver. Several hopper
// processes may share one database: claims take rows with FOR UPDATE SKIP
// LOCKED, and LISTEN/NOTIFY wakes every process's waiting claimWork calls
// when a run becomes pending anywhere.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/hopper-ci/hopper/internal/store"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Migrations returns the embedded schema migrations.
func Migrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationsFS, "migrations")
}

// Options tune Open.
type Options struct {
	// Schema, if set, is created if missing and used as the search path
	// (tests isolate themselves this way).
	Schema string
	// MaxConns bounds the connection pool (default 10).
	MaxConns int32
	Logger   *slog.Logger
}

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func channelName(schema string) string {
	if schema == "" {
		return "hopper_pending"
	}
	return "hopper_pending_" + schema
}

func dialect(channel string) store.Dialect {
	return store.Dialect{
		Name:           "postgres",
		Numbered:       true,
		LockRow:        " FOR UPDATE",
		LockSkip:       " FOR UPDATE SKIP LOCKED",
		LockShare:      " FOR SHARE",
		NextPendingSeq: "nextval('hopper_pending_seq')",
		NotifyPending: func(ctx context.Context, tx *sql.Tx, taskQueueID string) error {
			_, err := tx.ExecContext(ctx, "SELECT pg_notify($1, $2)", channel, taskQueueID)
			return err
		},
		Retryable: func(err error) bool {
			var pgErr *pgconn.PgError
			return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
		},
	}
}

// Open connects, applies migrations, and starts the LISTEN loop.
func Open(ctx context.Context, url string, opts Options) (*store.DB, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Schema != "" && !schemaPattern.MatchString(opts.Schema) {
		return nil, fmt.Errorf("invalid schema name %q", opts.Schema)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing PostgreSQL URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if cfg.MaxConns < 10 {
		cfg.MaxConns = 10
	}
	if opts.Schema != "" {
		admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
		if err != nil {
			return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
		}
		_, err = admin.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+opts.Schema)
		admin.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating schema %s: %w", opts.Schema, err)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	if err := migrate(ctx, sqlDB); err != nil {
		sqlDB.Close()
		pool.Close()
		return nil, err
	}
	channel := channelName(opts.Schema)
	db := store.New(dialect(channel), sqlDB, sqlDB, nil)
	l := &listener{cfg: cfg.ConnConfig.Copy(), channel: channel, hub: db.Hub(), log: opts.Logger}
	lctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	l.wg.Add(1)
	go l.run(lctx, ready)
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		opts.Logger.Warn("PostgreSQL LISTEN not established yet; continuing with polling fallback")
	}
	db.OnClose(func() error {
		cancel()
		l.wg.Wait()
		pool.Close()
		return nil
	})
	return db, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	lock := func(ctx context.Context, tx *sql.Tx) error {
		// Replicas starting together take turns.
		_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7270001)")
		return err
	}
	if _, err := store.Migrate(ctx, db, dialect(""), ms, lock); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	return nil
}

// listener relays NOTIFY messages into the in-process hub, reconnecting
// after failures.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	hub     *store.Hub
	log     *slog.Logger
	wg      sync.WaitGroup
}

func (l *listener) run(ctx context.Context, ready chan struct{}) {
	defer l.wg.Done()
	var once sync.Once
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx, func() { once.Do(func() { close(ready) }) })
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("PostgreSQL LISTEN connection lost; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *listener) listen(ctx context.Context, ready func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.hub.Notify(n.Payload)
	}
}
