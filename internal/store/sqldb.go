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
// database. Nothing else runs after a commit.
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
	}
	return nil
}

// Rows are the rows a statement returned, read inside a Statement's Rows
// function.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Statement is one statement of a transaction, with what to do with its
// result. Statements are queued and sent to the database together where
// the driver can (PostgreSQL pipelines them), so a transaction costs fewer
// round trips; a statement's result is handed over once it has run, before
// the next statement's.
type Statement struct {
	// Query is the statement text with the dialect's placeholders.
	Query string
	Args  []any
	// What describes the statement in errors ("saving task X").
	What string
	// Rows, if set, reads the rows the statement returned.
	Rows func(Rows) error
	// Exec, if set (and Rows is not), receives how many rows the statement
	// changed.
	Exec func(rowsAffected int64) error
}

// Wrap adds the statement's description to an error it caused.
func (s Statement) Wrap(err error) error {
	if err == nil || s.What == "" {
		return err
	}
	return fmt.Errorf("%s: %w", s.What, err)
}

// Tx is one transaction as a driver runs it. A driver may hold back
// starting the transaction until the first statements are sent, and send
// them with it.
type Tx interface {
	// Run executes stmts in order, stopping at the first error.
	Run(ctx context.Context, stmts []Statement) error
	// Commit executes stmts in order and then commits; on any error the
	// transaction is rolled back. The transaction is over either way.
	Commit(ctx context.Context, stmts []Statement) error
	// Rollback abandons the transaction (a no-op once it is over).
	Rollback() error
}

// sqlTx runs a transaction through database/sql, one statement at a time.
type sqlTx struct {
	tx *sql.Tx
	db *DB
}

func (db *DB) beginSQL(ctx context.Context) (Tx, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &sqlTx{tx: tx, db: db}, nil
}

// Run implements Tx.
func (s *sqlTx) Run(ctx context.Context, stmts []Statement) error {
	for _, st := range stmts {
		if err := s.run(ctx, st); err != nil {
			return st.Wrap(err)
		}
	}
	return nil
}

func (s *sqlTx) run(ctx context.Context, st Statement) error {
	prepared := s.db.prepared(ctx, s.db.write, st.Query)
	if st.Rows != nil {
		var (
			rows *sql.Rows
			err  error
		)
		if prepared != nil {
			rows, err = s.tx.StmtContext(ctx, prepared).QueryContext(ctx, st.Args...)
		} else {
			rows, err = s.tx.QueryContext(ctx, st.Query, st.Args...)
		}
		if err != nil {
			return err
		}
		err = st.Rows(rows)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = rows.Err()
		}
		return err
	}
	var (
		res sql.Result
		err error
	)
	if prepared != nil {
		res, err = s.tx.StmtContext(ctx, prepared).ExecContext(ctx, st.Args...)
	} else {
		res, err = s.tx.ExecContext(ctx, st.Query, st.Args...)
	}
	if err != nil || st.Exec == nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	return st.Exec(n)
}

// Commit implements Tx.
func (s *sqlTx) Commit(ctx context.Context, stmts []Statement) error {
	if err := s.Run(ctx, stmts); err != nil {
		_ = s.tx.Rollback()
		return err
	}
	return s.tx.Commit()
}

// Rollback implements Tx.
func (s *sqlTx) Rollback() error {
	err := s.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// txn is a transaction with the dialect's placeholder rewriting and a queue
// of statements not sent yet.
type txn struct {
	conn   Tx
	db     *DB
	notify map[string]int     // task queue → runs made pending
	offers map[string][]offer // task queue → the runs of notify whose tasks this transaction created (handover.go)
	queued []Statement
	// refused is the first statement's checkText error: the transaction
	// fails with it before anything more is sent.
	refused error
}

// send queues a statement; it runs with the next flush (or the commit).
// Its error, if any, surfaces there. A statement with a NUL in a text
// argument is not sent: the transaction fails with ErrTextNUL.
func (t *txn) send(st Statement) {
	if err := checkText(st.Args); err != nil && t.refused == nil {
		t.refused = st.Wrap(err)
	}
	st.Query = t.db.q(st.Query)
	t.queued = append(t.queued, st)
}

// flush runs the queued statements.
func (t *txn) flush(ctx context.Context) error {
	if t.refused != nil {
		return t.refused
	}
	if len(t.queued) == 0 {
		return nil
	}
	stmts := t.queued
	t.queued = nil
	return t.conn.Run(ctx, stmts)
}

// result is what exec reports, shaped like sql.Result.
type result struct{ affected int64 }

// RowsAffected returns how many rows the statement changed.
func (r result) RowsAffected() (int64, error) { return r.affected, nil }

// exec runs queued statements and then query.
func (t *txn) exec(ctx context.Context, query string, args ...any) (result, error) {
	var res result
	t.send(Statement{Query: query, Args: args, Exec: func(n int64) error {
		res.affected = n
		return nil
	}})
	err := t.flush(ctx)
	return res, err
}

// queryEach runs queued statements and then query, handing its rows to fn.
func (t *txn) queryEach(ctx context.Context, query string, args []any, fn func(Rows) error) error {
	t.send(Statement{Query: query, Args: args, Rows: fn})
	return t.flush(ctx)
}

// queryStrings runs queued statements and then query, returning its rows'
// single text column (the taskIds a transaction is about to act on).
func (t *txn) queryStrings(ctx context.Context, query string, args ...any) ([]string, error) {
	var out []string
	err := t.queryEach(ctx, query, args, func(rows Rows) error {
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// txRow is one row a transaction's query is to read, like *sql.Row.
type txRow struct {
	t     *txn
	ctx   context.Context
	query string
	args  []any
}

// Scan runs queued statements and the query and reads its first row into
// dest; sql.ErrNoRows when there is none.
func (r txRow) Scan(dest ...any) error {
	return r.t.queryEach(r.ctx, r.query, r.args, func(rows Rows) error { return scanOne(rows, dest...) })
}

// scanOne reads the first row into dest; sql.ErrNoRows when there is none.
func scanOne(rows Rows, dest ...any) error {
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	return rows.Scan(dest...)
}

func (t *txn) queryRow(ctx context.Context, query string, args ...any) txRow {
	return txRow{t: t, ctx: ctx, query: query, args: args}
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

// ErrTextNUL is why a statement with a NUL (U+0000) in a text value was not
// sent. PostgreSQL's text cannot hold a NUL (it fails the statement), so
// no store keeps one in a text column, whatever the driver: the API
// answers 400, and a value that must keep its NULs is stored as JSON,
// where a NUL is the escape \u0000. Checking every argument here, for
// both drivers, is what keeps a NUL from ever reaching PostgreSQL as a
// 500 and keeps SQLite from storing what PostgreSQL would refuse.
var ErrTextNUL = errors.New("a text value holds a NUL character (\\u0000), which hopper does not store")

// reportText is a text hopper records that came from elsewhere (the
// error a forge, a mail server or a Docker daemon answered, a summary
// quoting it): a NUL or bytes that are not UTF-8 in it become U+FFFD, so
// that recording what went wrong cannot itself fail.
func reportText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// checkText returns ErrTextNUL if a text argument holds a NUL.
func checkText(args []any) error {
	for _, a := range args {
		switch v := a.(type) {
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				return ErrTextNUL
			}
		case []string:
			for _, s := range v {
				if strings.IndexByte(s, 0) >= 0 {
					return ErrTextNUL
				}
			}
		case sql.NullString:
			if strings.IndexByte(v.String, 0) >= 0 {
				return ErrTextNUL
			}
		case *string:
			if v != nil && strings.IndexByte(*v, 0) >= 0 {
				return ErrTextNUL
			}
		}
	}
	return nil
}

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
