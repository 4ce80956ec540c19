package store

// Statements and transactions as the drivers run them: a store
// transaction (txn) queues statements and sends them together (Tx).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

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
