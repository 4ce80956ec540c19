package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
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
	// RunField gives the SQL expression of a field of the run whose
	// index is the placeholder runID in the JSON array of a task's runs
	// (the runs column), as text.
	RunField func(runID, field string) string
	// LockShare is appended to a SELECT to keep the rows it reads from
	// being transitioned (every transition locks its task with LockRow
	// first) until the transaction ends, while letting readers and claims
	// through ("" where the database serialises writers anyway).
	LockShare string
	// NextPendingSeq is an SQL expression giving the next pending-order
	// sequence number.
	NextPendingSeq string
	// Assert, if set, names an SQL function (ok boolean, message text) that
	// raises an error when ok is false, failing the transaction; with it a
	// batch of creates checks its own outcome and goes with its COMMIT in
	// one round trip. The database must also run data-modifying WITH
	// clauses.
	Assert string
	// PendingSeqs gives the SQL expression numbering the ordinal-th (1, 2,
	// …) row of a multi-row insert of pending runs, in row order.
	PendingSeqs func(ordinal string) string
	// Arrays says a list of values may be one array argument: "x = ANY(?)"
	// rather than "x IN (?, ?, …)", and rows from unnest rather than
	// VALUES (PostgreSQL). A statement of a batch then has one text
	// whatever its number of values, parsed and planned once per
	// connection rather than once per length: with a text per length,
	// that was a tenth of the database's CPU per task.
	Arrays bool
	// AnnouncePending, if set, is called after a transaction that made a
	// run pending has committed, so other processes sharing the database
	// wake their waiting claimWork calls. It must not block.
	AnnouncePending func(taskQueueID string, runs int)
	// CacheStatements keeps prepared statements per query text (for
	// drivers that do not cache them themselves).
	CacheStatements bool
	// Retryable reports whether a transaction failed only because of
	// contention (serialization failure, deadlock) and may simply be re-run.
	Retryable func(err error) bool
	// Begin, if set, starts transactions the driver's own way (PostgreSQL
	// sends queued statements together); otherwise they go through the
	// write handle's database/sql transactions.
	Begin func(ctx context.Context) (Tx, error)
	// Batches is how many transactions of combined UpdateTask calls (and as
	// many of CreateTask calls) may run at once (0: every call runs alone). Calls arriving while that
	// many are running wait and then share the next transaction.
	Batches int
}

// CombinedStats counts the transactions combined calls ran in (see
// Dialect.Batches): Calls/Batches is the mean number of calls per
// transaction.
type CombinedStats struct {
	UpdateBatches, UpdateCalls uint64
	CreateBatches, CreateCalls uint64
	// HandedOverRuns counts runs claimed from the hub's offers, without a
	// look at the queue (handover.go).
	HandedOverRuns uint64
	// ClaimedAtCreate counts runs claimed for waiting claimWork calls by
	// the creates that made them (direct.go).
	ClaimedAtCreate uint64
}

// CombinedStats reports how UpdateTask and CreateTask calls were combined
// so far (zero when the dialect runs every call alone).
func (db *DB) CombinedStats() CombinedStats {
	s := CombinedStats{HandedOverRuns: db.handedOver.Load(), ClaimedAtCreate: db.claimedAtCreate.Load()}
	if db.updates != nil {
		s.UpdateBatches, s.UpdateCalls = db.updates.batches.Load(), db.updates.calls.Load()
	}
	if db.creates != nil {
		s.CreateBatches, s.CreateCalls = db.creates.batches.Load(), db.creates.calls.Load()
	}
	return s
}

// maxBatch bounds the calls sharing one transaction.
const maxBatch = 32

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
	updates *combiner[*updateCall]
	creates *combiner[*createCall]
	flows   flowQueues // task queues known to have flow keys (flow.go)

	handedOver      atomic.Uint64 // runs claimed from offers (handover.go)
	claimedAtCreate atomic.Uint64 // runs claimed for waiting calls as created (direct.go)
}

var (
	_ Store   = (*DB)(nil)
	_ WorkHub = (*DB)(nil)
)

// New wraps database handles. write serves transactions; read serves plain
// queries (it may be the same handle). hub receives pending notifications;
// drivers that listen for other processes feed the same hub.
func New(d Dialect, write, read *sql.DB, hub *Hub) *DB {
	if hub == nil {
		hub = NewHub()
	}
	db := &DB{dialect: d, write: write, read: read, hub: hub, defs: definitionCache{max: 20000}}
	if d.Batches > 0 {
		db.updates = newCombiner(d.Batches, maxBatch, db.runUpdates)
		db.creates = newCombiner(d.Batches, maxBatch, db.runCreates)
	}
	return db
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

// SubscribePending implements WorkHub.
func (db *DB) SubscribePending(taskQueueID string, capacity int) (<-chan struct{}, func()) {
	return db.hub.Subscribe(taskQueueID, capacity)
}

// SubscribePendingFunc implements WorkHub.
func (db *DB) SubscribePendingFunc(taskQueueID string, capacity int, woken func()) (<-chan struct{}, func()) {
	return db.hub.SubscribeFunc(taskQueueID, capacity, woken)
}

// OnPending implements WorkHub.
func (db *DB) OnPending(f func(taskQueueID string)) { db.hub.OnPending(f) }

// WaitForWork implements WorkHub.
func (db *DB) WaitForWork(taskQueueID string, capacity int, c *Claimant, woken func()) *Waiting {
	return db.hub.Wait(taskQueueID, capacity, c, woken)
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
// contention failure. After a successful commit (tryTx), the runs the
// transaction made pending (txn.notify) are announced: to this process's
// hub, which wakes waiting claimWork calls or keeps the runs as offers, and
// through the dialect's AnnouncePending to the other processes sharing the
// database, and to the hub's observers (Hub.OnPending). Nothing else runs
// after a commit.
func (db *DB) tx(ctx context.Context, fn func(tx *txn) error) error {
	return retry.Do(ctx, txRetry, func(int) error {
		err := db.tryTx(ctx, fn)
		if err != nil && (db.dialect.Retryable == nil || !db.dialect.Retryable(err)) {
			return retry.Stop(err)
		}
		return err
	})
}

// txRetry re-runs a transaction the database aborted for contention (a
// serialization failure or deadlock) up to four more times, 5, 10, 15 and
// 20 ms after the failures: short, as the other transaction has usually
// committed by then.
var txRetry = retry.Policy{
	Attempts: 5,
	Delay:    func(n int) time.Duration { return time.Duration(n+1) * 5 * time.Millisecond },
}

func (db *DB) tryTx(ctx context.Context, fn func(tx *txn) error) error {
	var (
		conn Tx
		err  error
	)
	if db.dialect.Begin != nil {
		conn, err = db.dialect.Begin(ctx)
	} else {
		conn, err = db.beginSQL(ctx)
	}
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	t := &txn{conn: conn, db: db}
	if err := fn(t); err != nil {
		_ = conn.Rollback()
		return err
	}
	if t.refused != nil {
		_ = conn.Rollback()
		return t.refused
	}
	// Statements still queued go with the COMMIT.
	queued := t.queued
	t.queued = nil
	if err := conn.Commit(ctx, queued); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	for q, n := range t.notify {
		if offers := t.offers[q]; len(offers) == n {
			db.hub.notifyOffers(q, offers)
		} else {
			db.hub.Notify(q, n)
		}
		if db.dialect.AnnouncePending != nil {
			db.dialect.AnnouncePending(q, n)
		}
		db.hub.Announced(q)
	}
	return nil
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
		t.notify = map[string]int{}
	}
	t.notify[taskQueueID]++
}

func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := checkText(args); err != nil {
		return nil, err
	}
	if st := db.prepared(ctx, db.read, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.read.QueryContext(ctx, db.q(query), args...)
}

func (db *DB) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	if err := checkText(args); err != nil {
		return refusedRow{err}
	}
	if st := db.prepared(ctx, db.read, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.read.QueryRowContext(ctx, db.q(query), args...)
}

// refusedRow is the row of a query that was not sent: its Scan reports why.
type refusedRow struct{ err error }

func (r refusedRow) Scan(...any) error { return r.err }

// inList returns the condition that column is one of values, and its
// arguments: "column IN (?, …)", or one array argument where the dialect
// takes arrays.
func (db *DB) inList(column string, values []string) (string, []any) {
	if db.dialect.Arrays {
		return column + " = ANY(CAST(? AS TEXT[]))", []any{values}
	}
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return column + " IN (" + placeholders(len(values)) + ")", args
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

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
