package postgres

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// StatementTracer is a tracer for Options.Tracer that counts the
// statements a store's connections send, alone or in a pipelined batch
// (each statement of a batch, BEGIN and COMMIT included, once), and keeps
// their text when KeepText is set: what an operation costs in round
// trips and statements is measured with it (benchmarks, statement-count
// tests), never guessed.
type StatementTracer struct {
	KeepText bool

	mu   sync.Mutex
	n    int64
	text []string
}

func (s *StatementTracer) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.KeepText {
		s.text = append(s.text, sql)
	}
}

// Count is how many statements were sent so far.
func (s *StatementTracer) Count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Take returns the text of the statements kept since the last Take.
func (s *StatementTracer) Take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.text
	s.text = nil
	return out
}

// TraceQueryStart implements pgx.QueryTracer.
func (s *StatementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *StatementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (s *StatementTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (s *StatementTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (s *StatementTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
