package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hopper-ci/hopper/internal/store"
)

// pipelinedTx runs a transaction on one pooled connection through pgx
// itself rather than database/sql, so that the statements the store queues
// travel in one batch: BEGIN goes with the first of them and COMMIT with
// the last, and a reportCompleted costs three round trips instead of six.
// Within a batch PostgreSQL still runs each statement after the previous
// one has finished, with its own snapshot, exactly as if sent one by one;
// after a failed statement it skips the rest, COMMIT included.
//
// A transaction whose statements all go in one batch is sent without BEGIN
// and COMMIT: PostgreSQL runs the statements of a pipeline up to its Sync
// as one implicit transaction, committed at the Sync if every statement
// succeeded and rolled back otherwise, so the two extra statements would
// only cost their round of parsing, binding and executing.
type pipelinedTx struct {
	conn  *pgxpool.Conn
	begun bool
	done  bool
}

func beginPipelined(pool *pgxpool.Pool) func(ctx context.Context) (store.Tx, error) {
	return func(ctx context.Context) (store.Tx, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return &pipelinedTx{conn: conn}, nil
	}
}

// Run implements store.Tx.
func (p *pipelinedTx) Run(ctx context.Context, stmts []store.Statement) error {
	return p.send(ctx, stmts, false)
}

// Commit implements store.Tx.
func (p *pipelinedTx) Commit(ctx context.Context, stmts []store.Statement) error {
	if p.done {
		return errors.New("transaction already over")
	}
	err := p.send(ctx, stmts, true)
	if err != nil {
		_ = p.Rollback()
		return err
	}
	p.finish()
	return nil
}

// Rollback implements store.Tx.
func (p *pipelinedTx) Rollback() error {
	if p.done {
		return nil
	}
	defer p.finish()
	if p.conn.Conn().PgConn().TxStatus() == 'I' {
		return nil // never begun, or already ended by the server
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.conn.Exec(ctx, "ROLLBACK")
	return err
}

// finish returns the connection to the pool. The pool closes a connection
// that is still inside a transaction (a failed ROLLBACK) rather than reuse
// it.
func (p *pipelinedTx) finish() {
	p.done = true
	p.conn.Release()
}

func (p *pipelinedTx) send(ctx context.Context, stmts []store.Statement, commit bool) error {
	if p.done {
		return errors.New("transaction already over")
	}
	if len(stmts) == 0 && !commit {
		return nil
	}
	if len(stmts) == 0 && !p.begun {
		return nil // nothing was ever sent: there is nothing to commit
	}
	b := &pgx.Batch{}
	begin := !p.begun
	if begin && commit {
		// The whole transaction is this batch: an implicit one.
		begin, commit = false, false
	}
	if begin {
		b.Queue("BEGIN")
	}
	for _, st := range stmts {
		b.Queue(st.Query, st.Args...)
	}
	if commit {
		b.Queue("COMMIT")
	}
	br := p.conn.SendBatch(ctx, b)
	err := p.read(br, begin, stmts, commit)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

func (p *pipelinedTx) read(br pgx.BatchResults, begin bool, stmts []store.Statement, commit bool) error {
	if begin {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("beginning transaction: %w", err)
		}
		p.begun = true
	}
	for _, st := range stmts {
		if err := readOne(br, st); err != nil {
			return st.Wrap(err)
		}
	}
	if commit {
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		// COMMIT of a transaction that had failed answers ROLLBACK.
		if tag.String() != "COMMIT" {
			return fmt.Errorf("transaction rolled back (%s)", tag.String())
		}
	}
	return nil
}

func readOne(br pgx.BatchResults, st store.Statement) error {
	if st.Rows == nil {
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if st.Exec != nil {
			return st.Exec(tag.RowsAffected())
		}
		return nil
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	err = st.Rows(rows)
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	return err
}
