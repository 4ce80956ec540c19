package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/workermanager"
)

// WorkerManagerStore persists the Worker Manager service: worker pools,
// their workers and errors, and the provisioner's lease.
type WorkerManagerStore interface {
	// CreateWorkerPool stores a new pool; ErrExists if the id is taken.
	CreateWorkerPool(ctx context.Context, p *workermanager.Pool) error
	GetWorkerPool(ctx context.Context, workerPoolID string) (*workermanager.Pool, error)
	// UpdateWorkerPool lets fn change the locked pool and saves it.
	UpdateWorkerPool(ctx context.Context, workerPoolID string, fn func(*workermanager.Pool) error) (*workermanager.Pool, error)
	ListWorkerPools(ctx context.Context, page Page) ([]workermanager.Pool, string, error)
	// DeleteWorkerPool removes a pool for good, with its errors, if it is
	// marked deleted (null-provider) and has no worker left; it reports
	// whether it did.
	DeleteWorkerPool(ctx context.Context, workerPoolID string) (bool, error)

	// CreatePoolWorker stores a new worker. If the worker exists it
	// returns the existing one and ErrExists.
	CreatePoolWorker(ctx context.Context, w *workermanager.Worker) (*workermanager.Worker, error)
	GetPoolWorker(ctx context.Context, key workermanager.Key) (*workermanager.Worker, error)
	// UpdatePoolWorker lets fn change the locked worker and saves it.
	UpdatePoolWorker(ctx context.Context, key workermanager.Key, fn func(*workermanager.Worker) error) (*workermanager.Worker, error)
	// ListPoolWorkers lists workers by pool, group and id.
	ListPoolWorkers(ctx context.Context, f PoolWorkerFilter, page Page) ([]workermanager.Worker, string, error)
	// DeletePoolWorker removes a worker's record.
	DeletePoolWorker(ctx context.Context, key workermanager.Key) error
	// WorkerPoolCounts counts the workers of each pool by state (of every
	// pool when workerPoolIDs is nil).
	WorkerPoolCounts(ctx context.Context, workerPoolIDs []string) (map[string]workermanager.Counts, error)

	AddWorkerPoolError(ctx context.Context, e *workermanager.PoolError) error
	// ListWorkerPoolErrors lists errors newest first.
	ListWorkerPoolErrors(ctx context.Context, f PoolErrorFilter, page Page) ([]workermanager.PoolError, string, error)
	// WorkerPoolErrorsSince returns the errors reported since a time, of
	// one pool ("" for all).
	WorkerPoolErrorsSince(ctx context.Context, workerPoolID string, since time.Time) ([]workermanager.PoolError, error)
	// ExpireWorkerManager deletes stopped workers past their expiry and
	// errors older than errorsBefore.
	ExpireWorkerManager(ctx context.Context, now, errorsBefore time.Time) (workers, errors int, err error)

	// TakeLease gives holder the named lease until until if it is free,
	// expired or already holder's; it reports whether holder has it.
	TakeLease(ctx context.Context, p TakeLeaseParams) (bool, error)
	// ReleaseLease gives up holder's lease (if it still has it).
	ReleaseLease(ctx context.Context, name, holder string) error
	// RequestPoolWorker stores a new worker only while holder holds the
	// named lease at now (ErrLeaseLost otherwise), in one transaction that
	// keeps the lease from changing hands meanwhile: a provisioner whose
	// lease ran out can never add capacity another one already counted.
	RequestPoolWorker(ctx context.Context, p RequestPoolWorkerParams) error
}

// TakeLeaseParams describes TakeLease: Holder takes the named lease until
// Until if it is free at Now, expired or already Holder's.
type TakeLeaseParams struct {
	Name, Holder string
	Now, Until   time.Time
}

// RequestPoolWorkerParams describes RequestPoolWorker: Worker is stored
// only while Holder holds the named Lease at Now.
type RequestPoolWorkerParams struct {
	Worker        *workermanager.Worker
	Lease, Holder string
	Now           time.Time
}

// PoolWorkerFilter selects workers ("" fields select all).
type PoolWorkerFilter struct {
	WorkerPoolID   string
	WorkerGroup    string
	State          workermanager.State
	LaunchConfigID string
}

// PoolErrorFilter selects pool errors ("" fields select all).
type PoolErrorFilter struct {
	WorkerPoolID   string
	ErrorID        string
	LaunchConfigID string
}

const poolColumns = "worker_pool_id, provider_id, previous_provider_ids, description, config, owner, email_on_error, created, last_modified"

func scanPool(row rowScanner) (*workermanager.Pool, error) {
	var (
		p                 workermanager.Pool
		prev, config      string
		created, modified int64
	)
	if err := row.Scan(&p.WorkerPoolID, &p.ProviderID, &prev, &p.Description, &config, &p.Owner, &p.EmailOnError, &created, &modified); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(prev), &p.PreviousProviderIDs); err != nil {
		return nil, fmt.Errorf("decoding previous providers of pool %s: %w", p.WorkerPoolID, err)
	}
	p.Config = json.RawMessage(config)
	p.Created, p.LastModified = fromMS(created), fromMS(modified)
	return &p, nil
}

func poolArgs(p *workermanager.Pool) []any {
	prev := p.PreviousProviderIDs
	if prev == nil {
		prev = []string{}
	}
	prevJSON, _ := json.Marshal(prev)
	config := string(p.Config)
	if config == "" {
		config = "{}"
	}
	return []any{p.WorkerPoolID, p.ProviderID, string(prevJSON), p.Description, config, p.Owner, p.EmailOnError, ms(p.Created), ms(p.LastModified)}
}

// CreateWorkerPool implements WorkerManagerStore.
func (db *DB) CreateWorkerPool(ctx context.Context, p *workermanager.Pool) error {
	return db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "INSERT INTO wm_worker_pools ("+poolColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (worker_pool_id) DO NOTHING", poolArgs(p)...)
		if err != nil {
			return fmt.Errorf("creating worker pool %s: %w", p.WorkerPoolID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrExists
		}
		return nil
	})
}

// GetWorkerPool implements WorkerManagerStore.
func (db *DB) GetWorkerPool(ctx context.Context, workerPoolID string) (*workermanager.Pool, error) {
	p, err := scanPool(db.queryRow(ctx, "SELECT "+poolColumns+" FROM wm_worker_pools WHERE worker_pool_id = ?", workerPoolID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading worker pool %s: %w", workerPoolID, err)
	}
	return p, nil
}

// UpdateWorkerPool implements WorkerManagerStore.
func (db *DB) UpdateWorkerPool(ctx context.Context, workerPoolID string, fn func(*workermanager.Pool) error) (*workermanager.Pool, error) {
	var p *workermanager.Pool
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		p, err = scanPool(tx.queryRow(ctx, "SELECT "+poolColumns+" FROM wm_worker_pools WHERE worker_pool_id = ?"+db.dialect.LockRow, workerPoolID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("loading worker pool %s: %w", workerPoolID, err)
		}
		if err := fn(p); err != nil {
			return err
		}
		p.WorkerPoolID = workerPoolID
		args := poolArgs(p)
		_, err = tx.exec(ctx, `UPDATE wm_worker_pools SET provider_id = ?, previous_provider_ids = ?, description = ?, config = ?,
			owner = ?, email_on_error = ?, created = ?, last_modified = ? WHERE worker_pool_id = ?`, append(args[1:], workerPoolID)...)
		if err != nil {
			return fmt.Errorf("saving worker pool %s: %w", workerPoolID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ListWorkerPools implements WorkerManagerStore.
func (db *DB) ListWorkerPools(ctx context.Context, page Page) ([]workermanager.Pool, string, error) {
	out, next, err := listPage(ctx, db, page,
		func(cursor string) (string, []any, error) {
			return "SELECT " + poolColumns + " FROM wm_worker_pools WHERE worker_pool_id > ? ORDER BY worker_pool_id LIMIT ?", []any{cursor}, nil
		},
		func(row rowScanner) (workermanager.Pool, error) {
			p, err := scanPool(row)
			if err != nil {
				return workermanager.Pool{}, err
			}
			return *p, nil
		},
		func(p workermanager.Pool) string { return p.WorkerPoolID })
	if err != nil {
		return nil, "", fmt.Errorf("listing worker pools: %w", err)
	}
	return out, next, nil
}

// DeleteWorkerPool implements WorkerManagerStore.
func (db *DB) DeleteWorkerPool(ctx context.Context, workerPoolID string) (bool, error) {
	deleted := false
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, `DELETE FROM wm_worker_pools WHERE worker_pool_id = ? AND provider_id = ?
			AND NOT EXISTS (SELECT 1 FROM wm_workers WHERE worker_pool_id = ?)`, workerPoolID, workermanager.NullProvider, workerPoolID)
		if err != nil {
			return fmt.Errorf("deleting worker pool %s: %w", workerPoolID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			deleted = true
			_, err = tx.exec(ctx, "DELETE FROM wm_errors WHERE worker_pool_id = ?", workerPoolID)
			return err
		}
		return nil
	})
	return deleted, err
}

const poolWorkerColumns = `worker_pool_id, worker_group, worker_id, provider_id, state, capacity, launch_config_id, created, expires,
	last_modified, last_checked, static_secret_hash, secret_hash, registered_at, terminate_after, provider_data, previous_secret_hash`

func scanPoolWorker(row rowScanner) (*workermanager.Worker, error) {
	var (
		w                                                               workermanager.Worker
		state, data                                                     string
		created, expires, modified, checked, registered, terminateAfter int64
	)
	if err := row.Scan(&w.WorkerPoolID, &w.WorkerGroup, &w.WorkerID, &w.ProviderID, &state, &w.Capacity, &w.LaunchConfigID,
		&created, &expires, &modified, &checked, &w.StaticSecretHash, &w.SecretHash, &registered, &terminateAfter, &data, &w.PreviousSecretHash); err != nil {
		return nil, err
	}
	w.State = workermanager.State(state)
	w.Created, w.Expires, w.LastModified, w.LastChecked = fromMS(created), fromMS(expires), fromMS(modified), fromMS(checked)
	if registered > 0 {
		w.RegisteredAt = fromMS(registered)
	}
	if terminateAfter > 0 {
		w.TerminateAfter = fromMS(terminateAfter)
	}
	w.ProviderData = json.RawMessage(data)
	return &w, nil
}

func poolWorkerArgs(w *workermanager.Worker) []any {
	data := string(w.ProviderData)
	if data == "" {
		data = "{}"
	}
	return []any{w.WorkerPoolID, w.WorkerGroup, w.WorkerID, w.ProviderID, string(w.State), w.Capacity, w.LaunchConfigID,
		ms(w.Created), ms(w.Expires), ms(w.LastModified), ms(w.LastChecked), w.StaticSecretHash, w.SecretHash,
		optMS(w.RegisteredAt), optMS(w.TerminateAfter), data, w.PreviousSecretHash}
}

const poolWorkerKey = "worker_pool_id = ? AND worker_group = ? AND worker_id = ?"

// CreatePoolWorker implements WorkerManagerStore.
func (db *DB) CreatePoolWorker(ctx context.Context, w *workermanager.Worker) (*workermanager.Worker, error) {
	var existing *workermanager.Worker
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "INSERT INTO wm_workers ("+poolWorkerColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (worker_pool_id, worker_group, worker_id) DO NOTHING", poolWorkerArgs(w)...)
		if err != nil {
			return fmt.Errorf("creating worker %s: %w", w.Key(), err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		existing, err = scanPoolWorker(tx.queryRow(ctx, "SELECT "+poolWorkerColumns+" FROM wm_workers WHERE "+poolWorkerKey, w.WorkerPoolID, w.WorkerGroup, w.WorkerID))
		if err != nil {
			return fmt.Errorf("loading worker %s: %w", w.Key(), err)
		}
		return ErrExists
	})
	if errors.Is(err, ErrExists) {
		return existing, ErrExists
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// GetPoolWorker implements WorkerManagerStore.
func (db *DB) GetPoolWorker(ctx context.Context, key workermanager.Key) (*workermanager.Worker, error) {
	w, err := scanPoolWorker(db.queryRow(ctx, "SELECT "+poolWorkerColumns+" FROM wm_workers WHERE "+poolWorkerKey, key.WorkerPoolID, key.WorkerGroup, key.WorkerID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading worker %s: %w", key, err)
	}
	return w, nil
}

// UpdatePoolWorker implements WorkerManagerStore.
func (db *DB) UpdatePoolWorker(ctx context.Context, key workermanager.Key, fn func(*workermanager.Worker) error) (*workermanager.Worker, error) {
	var w *workermanager.Worker
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		w, err = scanPoolWorker(tx.queryRow(ctx, "SELECT "+poolWorkerColumns+" FROM wm_workers WHERE "+poolWorkerKey+db.dialect.LockRow, key.WorkerPoolID, key.WorkerGroup, key.WorkerID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("loading worker %s: %w", key, err)
		}
		if err := fn(w); err != nil {
			return err
		}
		w.WorkerPoolID, w.WorkerGroup, w.WorkerID = key.WorkerPoolID, key.WorkerGroup, key.WorkerID
		args := poolWorkerArgs(w)
		_, err = tx.exec(ctx, `UPDATE wm_workers SET provider_id = ?, state = ?, capacity = ?, launch_config_id = ?, created = ?, expires = ?,
			last_modified = ?, last_checked = ?, static_secret_hash = ?, secret_hash = ?, registered_at = ?, terminate_after = ?, provider_data = ?,
			previous_secret_hash = ? WHERE `+poolWorkerKey, append(args[3:], key.WorkerPoolID, key.WorkerGroup, key.WorkerID)...)
		if err != nil {
			return fmt.Errorf("saving worker %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// ListPoolWorkers implements WorkerManagerStore.
func (db *DB) ListPoolWorkers(ctx context.Context, f PoolWorkerFilter, page Page) ([]workermanager.Worker, string, error) {
	out, next, err := listPageFields(ctx, db, page, 3,
		func(cursor string) (string, []any, error) {
			var where []string
			var args []any
			add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
			if f.WorkerPoolID != "" {
				add("worker_pool_id = ?", f.WorkerPoolID)
			}
			if f.WorkerGroup != "" {
				add("worker_group = ?", f.WorkerGroup)
			}
			if f.State != "" {
				add("state = ?", string(f.State))
			}
			if f.LaunchConfigID != "" {
				add("launch_config_id = ?", f.LaunchConfigID)
			}
			if cursor != "" {
				parts := strings.SplitN(cursor, "\x00", 3)
				if len(parts) != 3 {
					return "", nil, ErrBadContinuationToken
				}
				where = append(where, "(worker_pool_id > ? OR (worker_pool_id = ? AND (worker_group > ? OR (worker_group = ? AND worker_id > ?))))")
				args = append(args, parts[0], parts[0], parts[1], parts[1], parts[2])
			}
			q := "SELECT " + poolWorkerColumns + " FROM wm_workers"
			if len(where) > 0 {
				q += " WHERE " + strings.Join(where, " AND ")
			}
			return q + " ORDER BY worker_pool_id, worker_group, worker_id LIMIT ?", args, nil
		},
		func(row rowScanner) (workermanager.Worker, error) {
			w, err := scanPoolWorker(row)
			if err != nil {
				return workermanager.Worker{}, err
			}
			return *w, nil
		},
		func(w workermanager.Worker) string {
			return w.WorkerPoolID + "\x00" + w.WorkerGroup + "\x00" + w.WorkerID
		})
	if err != nil {
		return nil, "", fmt.Errorf("listing workers: %w", err)
	}
	return out, next, nil
}

// DeletePoolWorker implements WorkerManagerStore.
func (db *DB) DeletePoolWorker(ctx context.Context, key workermanager.Key) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, "DELETE FROM wm_workers WHERE "+poolWorkerKey, key.WorkerPoolID, key.WorkerGroup, key.WorkerID)
		if err != nil {
			return fmt.Errorf("deleting worker %s: %w", key, err)
		}
		return nil
	})
}

// WorkerPoolCounts implements WorkerManagerStore.
func (db *DB) WorkerPoolCounts(ctx context.Context, workerPoolIDs []string) (map[string]workermanager.Counts, error) {
	q := "SELECT worker_pool_id, state, COUNT(*), COALESCE(SUM(capacity), 0) FROM wm_workers"
	var args []any
	if workerPoolIDs != nil {
		if len(workerPoolIDs) == 0 {
			return map[string]workermanager.Counts{}, nil
		}
		q += " WHERE worker_pool_id IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(workerPoolIDs)), ", ") + ")"
		for _, id := range workerPoolIDs {
			args = append(args, id)
		}
	}
	rows, err := db.query(ctx, q+" GROUP BY worker_pool_id, state", args...)
	if err != nil {
		return nil, fmt.Errorf("counting workers: %w", err)
	}
	defer rows.Close()
	out := map[string]workermanager.Counts{}
	for rows.Next() {
		var (
			pool, state     string
			count, capacity int64
		)
		if err := rows.Scan(&pool, &state, &count, &capacity); err != nil {
			return nil, fmt.Errorf("counting workers: %w", err)
		}
		c := out[pool]
		c.AddN(workermanager.State(state), int(count), int(capacity))
		out[pool] = c
	}
	return out, rows.Err()
}

const poolErrorColumns = "error_id, worker_pool_id, reported, kind, title, description, extra, launch_config_id"

func scanPoolError(row rowScanner) (*workermanager.PoolError, error) {
	var (
		e        workermanager.PoolError
		reported int64
		extra    string
	)
	if err := row.Scan(&e.ErrorID, &e.WorkerPoolID, &reported, &e.Kind, &e.Title, &e.Description, &extra, &e.LaunchConfigID); err != nil {
		return nil, err
	}
	e.Reported = fromMS(reported)
	if err := json.Unmarshal([]byte(extra), &e.Extra); err != nil {
		return nil, fmt.Errorf("decoding error %s: %w", e.ErrorID, err)
	}
	return &e, nil
}

// AddWorkerPoolError implements WorkerManagerStore.
func (db *DB) AddWorkerPoolError(ctx context.Context, e *workermanager.PoolError) error {
	extra := e.Extra
	if extra == nil {
		extra = map[string]any{}
	}
	extraJSON, err := json.Marshal(extra)
	if err != nil {
		return fmt.Errorf("encoding error %s: %w", e.ErrorID, err)
	}
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, "INSERT INTO wm_errors ("+poolErrorColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			e.ErrorID, e.WorkerPoolID, ms(e.Reported), e.Kind, e.Title, e.Description, string(extraJSON), e.LaunchConfigID)
		if err != nil {
			return fmt.Errorf("recording error of pool %s: %w", e.WorkerPoolID, err)
		}
		return nil
	})
}

// ListWorkerPoolErrors implements WorkerManagerStore.
func (db *DB) ListWorkerPoolErrors(ctx context.Context, f PoolErrorFilter, page Page) ([]workermanager.PoolError, string, error) {
	out, next, err := listPage(ctx, db, page,
		func(cursor string) (string, []any, error) {
			var where []string
			var args []any
			add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
			if f.WorkerPoolID != "" {
				add("worker_pool_id = ?", f.WorkerPoolID)
			}
			if f.ErrorID != "" {
				add("error_id = ?", f.ErrorID)
			}
			if f.LaunchConfigID != "" {
				add("launch_config_id = ?", f.LaunchConfigID)
			}
			if cursor != "" {
				at, id, err := splitCursor(cursor)
				if err != nil {
					return "", nil, err
				}
				where = append(where, "(reported < ? OR (reported = ? AND error_id > ?))")
				args = append(args, at, at, id)
			}
			q := "SELECT " + poolErrorColumns + " FROM wm_errors"
			if len(where) > 0 {
				q += " WHERE " + strings.Join(where, " AND ")
			}
			return q + " ORDER BY reported DESC, error_id LIMIT ?", args, nil
		},
		func(row rowScanner) (workermanager.PoolError, error) {
			e, err := scanPoolError(row)
			if err != nil {
				return workermanager.PoolError{}, err
			}
			return *e, nil
		},
		func(e workermanager.PoolError) string { return timeCursor(ms(e.Reported), e.ErrorID) })
	if err != nil {
		return nil, "", fmt.Errorf("listing worker pool errors: %w", err)
	}
	return out, next, nil
}

// WorkerPoolErrorsSince implements WorkerManagerStore.
func (db *DB) WorkerPoolErrorsSince(ctx context.Context, workerPoolID string, since time.Time) ([]workermanager.PoolError, error) {
	q, args := "SELECT "+poolErrorColumns+" FROM wm_errors WHERE reported >= ?", []any{ms(since)}
	if workerPoolID != "" {
		q, args = q+" AND worker_pool_id = ?", append(args, workerPoolID)
	}
	rows, err := db.query(ctx, q+" ORDER BY reported DESC, error_id", args...)
	if err != nil {
		return nil, fmt.Errorf("reading worker pool errors: %w", err)
	}
	defer rows.Close()
	var out []workermanager.PoolError
	for rows.Next() {
		e, err := scanPoolError(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, rows.Err()
}

// ExpireWorkerManager implements WorkerManagerStore.
func (db *DB) ExpireWorkerManager(ctx context.Context, now, errorsBefore time.Time) (int, int, error) {
	var workers, errs int
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "DELETE FROM wm_workers WHERE state = ? AND expires < ?", string(workermanager.StateStopped), ms(now))
		if err != nil {
			return fmt.Errorf("expiring stopped workers: %w", err)
		}
		n, _ := res.RowsAffected()
		workers = int(n)
		res, err = tx.exec(ctx, "DELETE FROM wm_errors WHERE reported < ?", ms(errorsBefore))
		if err != nil {
			return fmt.Errorf("expiring worker pool errors: %w", err)
		}
		n, _ = res.RowsAffected()
		errs = int(n)
		return nil
	})
	return workers, errs, err
}

// TakeLease implements WorkerManagerStore. One statement decides: the
// row is inserted, or updated where the lease is free, expired or the
// holder's own; a row left unchanged means another holder has it.
func (db *DB) TakeLease(ctx context.Context, p TakeLeaseParams) (bool, error) {
	got := false
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, `INSERT INTO wm_leases (name, holder, until) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
			WHERE wm_leases.holder = excluded.holder OR wm_leases.until <= ?`, p.Name, p.Holder, ms(p.Until), ms(p.Now))
		if err != nil {
			return fmt.Errorf("taking lease %s: %w", p.Name, err)
		}
		n, _ := res.RowsAffected()
		got = n == 1
		return nil
	})
	return got, err
}

// ReleaseLease implements WorkerManagerStore.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, "DELETE FROM wm_leases WHERE name = ? AND holder = ?", name, holder)
		if err != nil {
			return fmt.Errorf("releasing lease %s: %w", name, err)
		}
		return nil
	})
}

// RequestPoolWorker implements WorkerManagerStore.
func (db *DB) RequestPoolWorker(ctx context.Context, p RequestPoolWorkerParams) error {
	return db.tx(ctx, func(tx *txn) error {
		var one int
		err := tx.queryRow(ctx, "SELECT 1 FROM wm_leases WHERE name = ? AND holder = ? AND until > ?"+db.dialect.LockRow, p.Lease, p.Holder, ms(p.Now)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return fmt.Errorf("checking lease %s: %w", p.Lease, err)
		}
		res, err := tx.exec(ctx, "INSERT INTO wm_workers ("+poolWorkerColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (worker_pool_id, worker_group, worker_id) DO NOTHING", poolWorkerArgs(p.Worker)...)
		if err != nil {
			return fmt.Errorf("requesting worker %s: %w", p.Worker.Key(), err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrExists
		}
		return nil
	})
}
