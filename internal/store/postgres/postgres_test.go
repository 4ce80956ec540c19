package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

var schemaCounter atomic.Int64

// openTestDB opens a store in a fresh schema of HOPPER_TEST_POSTGRES, dropped
// when the test ends.
func openTestDB(t *testing.T) store.Store {
	t.Helper()
	url := os.Getenv("HOPPER_TEST_POSTGRES")
	if url == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to test against")
	}
	schema := fmt.Sprintf("hopper_test_%d_%d", time.Now().UnixNano()%1e9, schemaCounter.Add(1))
	db, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() {
		db.Close()
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	return db
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openTestDB)
}
