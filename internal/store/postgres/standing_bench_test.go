package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

// BenchmarkWorkerStanding: storetest.BenchWorkerStanding, with the
// statements sent counted.
func BenchmarkWorkerStanding(b *testing.B) {
	url := testURL(b)
	counter := &postgres.StatementTracer{}
	db, err := postgres.Open(context.Background(), url, postgres.Options{Schema: newSchema(b, url), MaxConns: 4, Tracer: counter})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	storetest.BenchWorkerStanding(b, db, counter.Count)
}
