package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

// statementCounter counts the statements a store's connections send,
// alone or in a pipelined batch.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// BenchmarkWorkerStanding: storetest.BenchWorkerStanding, with the
// statements sent counted.
func BenchmarkWorkerStanding(b *testing.B) {
	url := testURL(b)
	counter := &statementCounter{}
	db, err := postgres.Open(context.Background(), url, postgres.Options{Schema: newSchema(b, url), MaxConns: 4, Tracer: counter})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	storetest.BenchWorkerStanding(b, db, counter.n.Load)
}
