package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dialect holds what differs between the SQL databases hopper runs on.
type Dialect struct {
	// Name is "sqlite" or "postgres".
	Name string
	// Numbered reports whether placeholders are $1, $2… (PostgreSQL) rather
	// than "?".
	Numbered bool
	// LockRow is appended to a SELECT to lock the rows it reads until the
	// transaction ends ("" where the database serialises writers anyway).
	LockRow string
	// LockSkip is appended to a SELECT to lock its rows, skipping rows that
	// other transactions hold.
	LockSkip string
	// LockShare is appended to a SELECT to keep the rows it reads from
	// changing until the transaction ends, while letting other readers
	// share them ("" where the database serialises writers anyway).
	LockShare string
	// NextPendingSeq is an SQL expression giving the next pending-order
	// sequence number.
	NextPendingSeq string
	// AnnouncePending, if set, is called after a transaction that made a
	// run pending has committed, so other processes sharing the database
	// wake their waiting claimWork calls. It must not block.
	AnnouncePending func(taskQueueID string)
	// CacheStatements keeps prepared statements per query text (for
	// drivers that do not cache them themselves).
	CacheStatements bool
	// Retryable reports whether a transaction failed only because of
	// contention (serialization failure, deadlock) and may simply be re-run.
	Retryable func(err error) bool
}

// DB is the SQL implementation of Store shared by both drivers.
type DB struct {
	dialect Dialect
	write   *sql.DB
	read    *sql.DB
	hub     *Hub
	onClose []func() error

	rebound sync.Map // query text → dialect-specific text
	stmts   sync.Map // preparedKey → *sql.Stmt
	defs    definitionCache
}

var _ Store = (*DB)(nil)

// New wraps database handles. write serves transactions; read serves plain
// queries (it may be the same handle). hub receives pending notifications;
// drivers that listen for other processes feed the same hub.
func New(d Dialect, write, read *sql.DB, hub *Hub) *DB {
	if hub == nil {
		hub = NewHub()
	}
	return &DB{dialect: d, write: write, read: read, hub: hub, defs: definitionCache{max: 20000}}
}

// OnClose registers a function Close calls (drivers stop listeners there).
func (db *DB) OnClose(fn func() error) { db.onClose = append(db.onClose, fn) }

// Close releases the database handles.
func (db *DB) Close() error {
	var errs []error
	for _, fn := range db.onClose {
		errs = append(errs, fn())
	}
	db.stmts.Range(func(_, st any) bool {
		_ = st.(*sql.Stmt).Close()
		return true
	})
	errs = append(errs, db.write.Close())
	if db.read != db.write {
		errs = append(errs, db.read.Close())
	}
	return errors.Join(errs...)
}

// Hub returns the in-process pending notification hub.
func (db *DB) Hub() *Hub { return db.hub }

// SubscribePending implements Store.
func (db *DB) SubscribePending(taskQueueID string) (<-chan struct{}, func()) {
	return db.hub.Subscribe(taskQueueID)
}

// q rewrites "?" placeholders for the dialect (cached).
func (db *DB) q(query string) string {
	if !db.dialect.Numbered {
		return query
	}
	if v, ok := db.rebound.Load(query); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	out := b.String()
	db.rebound.Store(query, out)
	return out
}

// tx runs fn in a transaction, re-running it when the database reports a
// contention failure. afterCommit hooks registered during fn run after a
// successful commit.
func (db *DB) tx(ctx context.Context, fn func(tx *txn) error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = db.tryTx(ctx, fn)
		retry := err != nil && db.dialect.Retryable != nil && db.dialect.Retryable(err)
		if !retry {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	return err
}

func (db *DB) tryTx(ctx context.Context, fn func(tx *txn) error) error {
	sqlTx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	t := &txn{Tx: sqlTx, db: db}
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	for q := range t.notify {
		db.hub.Notify(q)
		if db.dialect.AnnouncePending != nil {
			db.dialect.AnnouncePending(q)
		}
	}
	return nil
}

// txn is a transaction with the dialect's placeholder rewriting.
type txn struct {
	*sql.Tx
	db     *DB
	notify map[string]struct{}
}

func (t *txn) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.db.prepared(ctx, t.db.write, query); st != nil {
		return t.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.ExecContext(ctx, t.db.q(query), args...)
}

func (t *txn) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.db.prepared(ctx, t.db.write, query); st != nil {
		return t.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.QueryContext(ctx, t.db.q(query), args...)
}

func (t *txn) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.db.prepared(ctx, t.db.write, query); st != nil {
		return t.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.QueryRowContext(ctx, t.db.q(query), args...)
}

// preparedKey identifies a cached statement: the handle and the query.
type preparedKey struct {
	handle *sql.DB
	query  string
}

// prepared returns a cached prepared statement for query on handle when the
// dialect asks for statement caching (SQLite, whose driver would otherwise
// parse every statement on every call), or nil to run the text directly.
// Queries built with a variable number of placeholders are cached per
// shape; there are few shapes.
func (db *DB) prepared(ctx context.Context, handle *sql.DB, query string) *sql.Stmt {
	if !db.dialect.CacheStatements {
		return nil
	}
	key := preparedKey{handle, query}
	if st, ok := db.stmts.Load(key); ok {
		return st.(*sql.Stmt)
	}
	st, err := handle.PrepareContext(context.WithoutCancel(ctx), db.q(query))
	if err != nil {
		return nil // let the direct call report the error
	}
	if prev, loaded := db.stmts.LoadOrStore(key, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt)
	}
	return st
}

func (t *txn) notifyPending(taskQueueID string) {
	if t.notify == nil {
		t.notify = map[string]struct{}{}
	}
	t.notify[taskQueueID] = struct{}{}
}

func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := db.prepared(ctx, db.read, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.read.QueryContext(ctx, db.q(query), args...)
}

func (db *DB) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := db.prepared(ctx, db.read, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.read.QueryRowContext(ctx, db.q(query), args...)
}

// placeholders returns "?, ?, …" for n values.
func placeholders(n int) string {
	if n == 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

const (
	defaultPageSize = 1000
	maxPageSize     = 1000
)

func (p Page) size() int {
	if p.Limit <= 0 || p.Limit > maxPageSize {
		return defaultPageSize
	}
	return p.Limit
}

// Continuation tokens are opaque to callers: base64url of a cursor string.
func encodeToken(cursor string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursor))
}

func decodeToken(token string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 {
		return "", ErrBadContinuationToken
	}
	return string(b), nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
