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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/hopper-ci/hopper/internal/retry"
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
	// Batches is how many transactions of combined task updates (and as
	// many of combined creates) run at once; calls arriving meanwhile share
	// the next one. 0 means 1; negative runs every call alone.
	Batches int
	Logger  *slog.Logger
	// Tracer, if set, sees every statement sent (pgx's tracer; one that is
	// also a pgx.BatchTracer sees each statement of a batch): the
	// benchmarks count a duty's statements with it.
	Tracer pgx.QueryTracer
}

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func channelName(schema string) string {
	if schema == "" {
		return "hopper_pending"
	}
	return "hopper_pending_" + schema
}

// dialect describes PostgreSQL; with a pool, transactions send their
// statements in batches through it.
func dialect(announce func(taskQueueID string, runs int), pool *pgxpool.Pool, batches int) store.Dialect {
	var begin func(ctx context.Context) (store.Tx, error)
	if pool != nil {
		begin = beginPipelined(pool)
	}
	return store.Dialect{
		Begin:    begin,
		Name:     "postgres",
		Numbered: true,
		LockRow:  " FOR UPDATE",
		// A claim's lock and a dependency check's lock do not conflict:
		// a claim never resolves a task, and a pending task whose new
		// dependent is being created is still claimable at once (a claim
		// skipping it would find no wake-up coming for it). Both conflict
		// with the FOR UPDATE of every transition.
		LockSkip:       " FOR NO KEY UPDATE SKIP LOCKED",
		LockShare:      " FOR KEY SHARE",
		RunField:       func(runID, field string) string { return "(runs::jsonb -> " + runID + "::int ->> '" + field + "')" },
		NextPendingSeq: "nextval('hopper_pending_seq')",
		Assert:         "hopper_assert", // migration 003
		// nextval is evaluated row by row, in the statement's row order.
		PendingSeqs:     func(string) string { return "nextval('hopper_pending_seq')" },
		AnnouncePending: announce,
		Arrays:          true,
		Batches:         batches,
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
	// Every query hopper sends is a look-up by an index. The tables of a
	// queue change size fast (a new deployment goes from empty to thousands
	// of rows in seconds), and a plan chosen while a table looked tiny (a
	// sequential or bitmap scan plus a sort) stays cached on the connection
	// until the next ANALYZE, costing O(table) per call meanwhile. Steering
	// the planner away from those scans keeps every plan an index scan
	// whatever the statistics say; a URL can still set them otherwise.
	//
	// For the same reason, and because planning was a tenth of the
	// database's CPU per task, statements keep one generic plan per
	// connection (pgx prepares each statement text once per connection).
	// The default would plan each new statement text five times for its
	// parameters before trying a generic plan, and the batched statements
	// come in many texts (one per number of rows), most of which never
	// reach five calls on one connection; a parameter's value never changes
	// which index a hopper query should use.
	//
	// A generic plan does not know a page's LIMIT and assumes a tenth of
	// the table: on a million tasks the task history's pages were planned
	// as parallel queries, whose two workers took 40–200 ms to start for
	// under a millisecond of work (BenchmarkListTasksMillion). hopper's
	// queries each read a few rows through an index, so none runs in
	// parallel.
	for param, value := range map[string]string{
		"enable_seqscan":                  "off",
		"enable_bitmapscan":               "off",
		"plan_cache_mode":                 "force_generic_plan",
		"max_parallel_workers_per_gather": "0",
	} {
		if _, set := cfg.ConnConfig.RuntimeParams[param]; !set {
			cfg.ConnConfig.RuntimeParams[param] = value
		}
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
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
	ann := newAnnouncer(pool, channel, opts.Logger)
	db := store.New(dialect(ann.announce, pool, batches(opts.Batches)), sqlDB, sqlDB, nil)
	l := &listener{cfg: cfg.ConnConfig.Copy(), channel: channel, hub: db.Hub(), log: opts.Logger, origin: ann.origin}
	lctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	l.wg.Add(1)
	go l.run(lctx, ready)
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		l.gaveUp.Store(true)
		opts.Logger.Warn("PostgreSQL LISTEN not established yet; continuing with polling fallback")
	}
	db.OnClose(func() error {
		ann.close()
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
	if _, err := store.Migrate(ctx, db, dialect(nil, nil, 0), ms, lock); err != nil {
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
	origin  string // this process's announcements, to skip

	connected bool        // a connection was made before (run's goroutine only)
	gaveUp    atomic.Bool // Open stopped waiting for the first connection
}

func (l *listener) run(ctx context.Context, ready chan struct{}) {
	defer l.wg.Done()
	var once sync.Once
	// Until the store closes (ctx ends): listen returns only on a failure,
	// and Do waits out its delay or ctx.
	_ = retry.Do(ctx, listenRetry, func(n int) error {
		err := l.listen(ctx, func() { once.Do(func() { close(ready) }) })
		if ctx.Err() != nil {
			return retry.Stop(ctx.Err())
		}
		l.log.Warn("PostgreSQL LISTEN connection lost; reconnecting", "error", err, "backoff", listenRetry.Delay(n))
		return err
	})
}

// listenRetry reconnects the listener without end, 100 ms after its first
// loss, doubling to 5 s. The delay grows over the process's life, not per
// outage: a connection that keeps dropping is retried at most every 5 s.
var listenRetry = retry.Policy{Delay: retry.Doubling(100*time.Millisecond, 5*time.Second)}

func (l *listener) listen(ctx context.Context, ready func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// Announcements made while no listener was connected are lost, so
	// after a reconnection (or a first connection Open stopped waiting
	// for) every waiter looks for itself once. A first connection made
	// before Open returned has no waiter to tell.
	missed := l.connected || l.gaveUp.Load()
	l.connected = true
	ready()
	if missed {
		l.hub.NotifyAll()
		l.hub.Announced("")
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		a, ok := parseAnnouncement(n.Payload)
		if !ok || a.origin == l.origin {
			continue // this process woke its own waiters already
		}
		l.hub.Notify(a.taskQueueID, a.runs)
		l.hub.Announced(a.taskQueueID)
	}
}

// announcer sends the NOTIFY that wakes other processes' claimWork calls,
// after commit and coalesced: PostgreSQL serialises the commits of every
// transaction that issued a NOTIFY, so notifying inside each createTask
// would cap the whole queue at one commit at a time. Here a burst of tasks
// made pending in one queue costs one NOTIFY. If the process dies between a
// commit and its NOTIFY, other processes still find the task on their
// claimWork backup poll (five seconds).
type announcer struct {
	pool    *pgxpool.Pool
	channel string
	log     *slog.Logger
	origin  string // names this process in its announcements
	queued  chan announcement
	done    chan struct{}
	once    sync.Once
}

// announcement is the payload of a NOTIFY: runs made pending in a task
// queue by the process named origin, written "origin runs taskQueueId"
// (task queue ids hold no spaces).
type announcement struct {
	origin      string
	runs        int
	taskQueueID string
}

func (a announcement) String() string {
	return a.origin + " " + strconv.Itoa(a.runs) + " " + a.taskQueueID
}

func parseAnnouncement(payload string) (announcement, bool) {
	origin, rest, ok1 := strings.Cut(payload, " ")
	runs, queue, ok2 := strings.Cut(rest, " ")
	n, err := strconv.Atoi(runs)
	if !ok1 || !ok2 || err != nil || n < 1 || queue == "" {
		return announcement{}, false
	}
	return announcement{origin: origin, runs: n, taskQueueID: queue}, true
}

// announceEvery is the least time between two NOTIFYs. Each NOTIFY is a
// transaction of its own with a commit to flush, and it wakes every
// listening process's backend: sent as often as commits made runs pending,
// they were a tenth of the database's CPU per task. A wake-up after a quiet
// spell goes out at once; under load, those that come meanwhile are
// gathered into the next, so other processes hear of new runs up to this
// much later. This process's own waiters are woken at the commit.
const announceEvery = 50 * time.Millisecond

func newAnnouncer(pool *pgxpool.Pool, channel string, log *slog.Logger) *announcer {
	a := &announcer{pool: pool, channel: channel, log: log, origin: uuid.NewString(),
		queued: make(chan announcement, 1024), done: make(chan struct{})}
	go a.run()
	return a
}

// announce queues a wake-up for the task queue; it never blocks (a full
// backlog already holds wake-ups enough).
func (a *announcer) announce(taskQueueID string, runs int) {
	select {
	case a.queued <- announcement{origin: a.origin, runs: runs, taskQueueID: taskQueueID}:
	default:
	}
}

func (a *announcer) run() {
	defer close(a.done)
	var last time.Time
	for first := range a.queued {
		batch := map[string]int{first.taskQueueID: first.runs}
		if wait := announceEvery - time.Since(last); wait > 0 {
			linger := time.NewTimer(wait)
		collect:
			for {
				select {
				case next, ok := <-a.queued:
					if !ok {
						break collect
					}
					batch[next.taskQueueID] += next.runs
				case <-linger.C:
					break collect
				}
			}
			linger.Stop()
		}
	queued:
		for { // and what is queued already
			select {
			case next, ok := <-a.queued:
				if !ok {
					break queued
				}
				batch[next.taskQueueID] += next.runs
			default:
				break queued
			}
		}
		payloads := make([]string, 0, len(batch))
		for q, n := range batch {
			payloads = append(payloads, announcement{origin: a.origin, runs: n, taskQueueID: q}.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := a.pool.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", a.channel, payloads)
		cancel()
		if err != nil {
			a.log.Warn("announcing pending tasks to other hopper processes", "error", err)
		}
		last = time.Now()
	}
}

func (a *announcer) close() {
	a.once.Do(func() { close(a.queued) })
	<-a.done
}

// batches resolves Options.Batches.
func batches(n int) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		// One: every call arriving while a transaction runs joins the
		// next, which shares the most work; measured best on two cores.
		return 1
	}
	return n
}
