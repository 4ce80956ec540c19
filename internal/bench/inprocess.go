package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// InProcessOptions configure StartInProcess.
type InProcessOptions struct {
	// DB selects the store: "sqlite" (a file in a temporary directory),
	// "sqlite:PATH", or a postgres:// URL naming a server on which a fresh
	// database hopper_bench_<pid>_<n> is created and, on Close, dropped (the
	// URL's own database is only used to run CREATE and DROP DATABASE).
	DB string
	// Logger receives the server's logs (default: warnings and errors to
	// stderr).
	Logger *slog.Logger
	// PrefillConcurrency is how many CreateTask calls Prefill makes at
	// once (default 64: the store writes concurrent creates in shared
	// batches, so more callers mean bigger batches; a 1,000,000-task
	// backlog takes minutes).
	PrefillConcurrency int
	// DBBatches tunes the store (see server.StoreOptions.Batches).
	DBBatches int
	// ServerCommand, if set, runs the server as a child process instead:
	// the hopper executable and its serve subcommand (e.g. [os.Executable(),
	// "serve"]), so that its CPU time and memory are measured apart from the
	// load generator's (child.go).
	ServerCommand []string
}

// prefillStore is the store as Prefill uses it: it creates tasks and
// closes the handle when the server stops.
type prefillStore interface {
	CreateTask(ctx context.Context, p store.CreateTaskParams) (*store.Result, error)
	Close() error
}

// InProcess is a hopper queue server running inside this process on a free
// loopback port, with a generated root token and a throw-away data
// directory (and database).
type InProcess struct {
	// RootURL is where the server listens.
	RootURL string
	// Credentials are the root client's.
	Credentials *tcclient.Credentials
	// Kind is "sqlite" or "postgres".
	Kind string

	store        prefillStore // a second handle on the server's database, for Prefill
	concurrency  int
	cancel       context.CancelFunc
	done         chan error
	cleanups     []func() error
	serverPID    int    // the child server's, when there is one
	dbURL        string // the PostgreSQL database's
	backends     *pgBackends
	backendsOnce sync.Once
	closeOnce    sync.Once
	closeErr     error
}

var dbCounter atomic.Int64

// taskQueuePattern is the API's taskQueueId pattern (docs/contract/queue.md §1.2).
var taskQueuePattern = ident.TaskQueueID()

// StartInProcess starts a server (internal/server.Run) and waits until it
// listens. Close stops it and removes what it created.
func StartInProcess(ctx context.Context, opts InProcessOptions) (_ *InProcess, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	p := &InProcess{}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	dataDir, err := os.MkdirTemp("", "hopper-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating a data directory: %w", err)
	}
	p.cleanups = append(p.cleanups, func() error { return os.RemoveAll(dataDir) })

	spec := opts.DB
	switch {
	case spec == "" || spec == "sqlite":
		p.Kind = "sqlite"
		spec = "sqlite:" + filepath.Join(dataDir, "hopper.db")
	case strings.HasPrefix(spec, "sqlite:"):
		p.Kind = "sqlite"
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		p.Kind = "postgres"
		fresh, drop, err := createPostgresDatabase(ctx, spec)
		if err != nil {
			return nil, err
		}
		p.cleanups = append(p.cleanups, drop)
		spec = fresh
	default:
		return nil, fmt.Errorf("bench: unknown --db %q: want sqlite, sqlite:PATH or a postgres:// URL", opts.DB)
	}
	p.concurrency = opts.PrefillConcurrency
	if p.concurrency <= 0 {
		p.concurrency = 64
	}

	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	p.Credentials = &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: token}

	if p.Kind == "postgres" {
		p.dbURL = spec
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done = make(chan error, 1)
	ready := make(chan string, 1)
	if len(opts.ServerCommand) > 0 {
		if err := p.startChild(ctx, runCtx, opts, spec, dataDir, token, ready); err != nil {
			return nil, err
		}
	} else {
		go func() {
			p.done <- server.Run(runCtx, server.Config{
				Store:  server.StoreOptions{Batches: opts.DBBatches},
				Listen: "127.0.0.1:0", DB: spec, DataDir: dataDir,
				ClaimTimeout: server.DefaultClaimTimeout, DeadlineDelay: server.DefaultDeadlineDelay,
				RootAccessToken: token, Logger: opts.Logger, Version: "bench",
				Ready: func(rootURL string) { ready <- rootURL },
			})
		}()
	}
	select {
	case p.RootURL = <-ready:
	case err := <-p.done:
		p.done <- err // for Close
		return nil, fmt.Errorf("starting the in-process server: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// The server has migrated the database; a second handle on it lets
	// Prefill skip HTTP.
	st, err := server.OpenStore(ctx, spec, dataDir, opts.Logger, server.StoreOptions{Batches: opts.DBBatches})
	if err != nil {
		return nil, fmt.Errorf("opening the store for pre-filling: %w", err)
	}
	p.store = st
	return p, nil
}

// Close stops the server and removes its data directory and database; safe
// to call twice.
func (p *InProcess) Close() error {
	p.closeOnce.Do(func() {
		var errs []error
		if p.store != nil {
			errs = append(errs, p.store.Close())
		}
		if p.cancel != nil {
			p.cancel()
			if err := <-p.done; err != nil {
				errs = append(errs, fmt.Errorf("in-process server: %w", err))
			}
		}
		for i := len(p.cleanups) - 1; i >= 0; i-- {
			errs = append(errs, p.cleanups[i]())
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// PrefillMethod describes Prefill for reports.
func (p *InProcess) PrefillMethod() string {
	return fmt.Sprintf("store.CreateTask directly, %d concurrent", p.concurrency)
}

// Prefill queues n pending tasks in taskQueueID by calling the store's
// CreateTask directly, as createTask would after validation and
// authorization: the same transaction, so the same rows and pending order,
// without HTTP, Hawk and JSON-schema costs. It implements PrefillFunc.
func (p *InProcess) Prefill(ctx context.Context, taskQueueID string, n int) error {
	// The store trusts its caller; check what the API would have.
	if !taskQueuePattern.MatchString(taskQueueID) {
		return fmt.Errorf("bench: %q is not a valid taskQueueId", taskQueueID)
	}
	return repeatConcurrently(ctx, p.concurrency, n, func(ctx context.Context) error {
		return p.createDirect(ctx, taskQueueID)
	})
}

func (p *InProcess) createDirect(ctx context.Context, taskQueueID string) error {
	now := time.Now()
	id := tcclient.NewTaskID()
	def := taskDefinition(taskQueueID, now, backlogDeadline)
	expires := queue.NewTime(def.Expires.Time)
	task, err := queue.BuildTask(id, queue.CreateTaskInput{
		TaskQueueID: taskQueueID,
		Created:     queue.NewTime(def.Created.Time),
		Deadline:    queue.NewTime(def.Deadline.Time),
		Expires:     &expires,
		Payload:     def.Payload,
		Metadata: queue.Metadata{Name: def.Metadata.Name, Description: def.Metadata.Description,
			Owner: def.Metadata.Owner, Source: def.Metadata.Source},
	}, now, 0)
	if err != nil {
		return fmt.Errorf("building task %s: %w", id, err)
	}
	if _, err := p.store.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: task, Now: now}); err != nil {
		return fmt.Errorf("creating task %s in the store: %w", id, err)
	}
	return nil
}

// randomToken returns a fresh root access token (44 URL-safe characters).
func randomToken() (string, error) {
	var b [33]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a root access token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// createPostgresDatabase creates an empty database on the server base
// names and returns its URL and a function that drops it.
func createPostgresDatabase(ctx context.Context, base string) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("parsing the PostgreSQL URL: %w", err)
	}
	name := fmt.Sprintf("hopper_bench_%d_%d", os.Getpid(), dbCounter.Add(1))
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", nil, fmt.Errorf("dropping a stale database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	drop := func() error {
		// Dropping a database waits on the server's I/O (its files are
		// removed, and on some versions a checkpoint runs first), which
		// on a server busy with other tests' writes took over 30 s once:
		// the drop is cleanup, given long enough for a slow server.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("connecting to PostgreSQL to drop %s: %w", name, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("dropping database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
