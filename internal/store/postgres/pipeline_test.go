package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// pipelineTestPool opens a one-connection pool on a fresh schema holding
// table kv, so every transaction reuses the connection the previous one
// left behind.
func pipelineTestPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("HOPPER_TEST_POSTGRES")
	if url == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to test against")
	}
	ctx := context.Background()
	schema := fmt.Sprintf("hopper_pipe_%d", time.Now().UnixNano())
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	})
	_, err = pool.Exec(ctx, "CREATE TABLE kv (k TEXT PRIMARY KEY, v BIGINT NOT NULL)")
	require.NoError(t, err)
	// kd's uniqueness is checked only when its transaction commits.
	_, err = pool.Exec(ctx, "CREATE TABLE kd (k TEXT UNIQUE DEFERRABLE INITIALLY DEFERRED)")
	require.NoError(t, err)
	return pool
}

func insertKV(k string, v int64) store.Statement {
	return store.Statement{Query: "INSERT INTO kv (k, v) VALUES ($1, $2)", Args: []any{k, v}, What: "inserting " + k}
}

func readKV(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT k, v FROM kv")
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		require.NoError(t, rows.Scan(&k, &v))
		out[k] = v
	}
	require.NoError(t, rows.Err())
	return out
}

func TestPipelinedTx(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// run drives one transaction and returns the error it ended with.
		run     func(ctx context.Context, tx store.Tx) error
		wantErr string
		want    map[string]int64
	}{
		{
			name: "batches then commit with the last statements",
			run: func(ctx context.Context, tx store.Tx) error {
				var affected int64
				var seen int64
				if err := tx.Run(ctx, []store.Statement{
					insertKV("a", 1),
					{Query: "UPDATE kv SET v = v + 1 WHERE k = $1", Args: []any{"a"}, Exec: func(n int64) error { affected = n; return nil }},
					{Query: "SELECT v FROM kv WHERE k = $1", Args: []any{"a"}, Rows: func(rows store.Rows) error {
						if !rows.Next() {
							return fmt.Errorf("no row")
						}
						return rows.Scan(&seen)
					}},
				}); err != nil {
					return err
				}
				if affected != 1 || seen != 2 {
					return fmt.Errorf("affected %d, seen %d", affected, seen)
				}
				return tx.Commit(ctx, []store.Statement{insertKV("b", seen)})
			},
			want: map[string]int64{"a": 2, "b": 2},
		},
		{
			name: "a failing statement stops the batch and the commit",
			run: func(ctx context.Context, tx store.Tx) error {
				return tx.Commit(ctx, []store.Statement{insertKV("a", 1), insertKV("a", 2), insertKV("c", 3)})
			},
			wantErr: "inserting a",
			want:    map[string]int64{},
		},
		{
			name: "one batch is one transaction: later statements see earlier ones",
			run: func(ctx context.Context, tx store.Tx) error {
				return tx.Commit(ctx, []store.Statement{
					insertKV("a", 1),
					{Query: "INSERT INTO kv (k, v) SELECT 'b', v + 1 FROM kv WHERE k = 'a'"},
				})
			},
			want: map[string]int64{"a": 1, "b": 2},
		},
		{
			name: "a failure at the commit of one batch keeps nothing",
			run: func(ctx context.Context, tx store.Tx) error {
				kd := store.Statement{Query: "INSERT INTO kd (k) VALUES ('x')"}
				return tx.Commit(ctx, []store.Statement{insertKV("a", 1), kd, kd})
			},
			wantErr: "kd_k_key",
			want:    map[string]int64{},
		},
		{
			name: "a failure at the commit after several batches keeps nothing",
			run: func(ctx context.Context, tx store.Tx) error {
				kd := store.Statement{Query: "INSERT INTO kd (k) VALUES ('x')"}
				if err := tx.Run(ctx, []store.Statement{insertKV("a", 1), kd}); err != nil {
					return err
				}
				return tx.Commit(ctx, []store.Statement{kd})
			},
			wantErr: "kd_k_key",
			want:    map[string]int64{},
		},
		{
			name: "a failed batch leaves nothing to commit",
			run: func(ctx context.Context, tx store.Tx) error {
				if err := tx.Run(ctx, []store.Statement{insertKV("a", 1), insertKV("a", 2)}); err == nil {
					return fmt.Errorf("duplicate key accepted")
				}
				return tx.Commit(ctx, []store.Statement{insertKV("b", 1)})
			},
			wantErr: "aborted",
			want:    map[string]int64{},
		},
		{
			name: "a reader's error rolls back",
			run: func(ctx context.Context, tx store.Tx) error {
				err := tx.Run(ctx, []store.Statement{insertKV("a", 1), {Query: "SELECT 1", What: "reading", Rows: func(store.Rows) error {
					return fmt.Errorf("refused")
				}}})
				if err != nil {
					_ = tx.Rollback()
				}
				return err
			},
			wantErr: "reading: refused",
			want:    map[string]int64{},
		},
		{
			name: "rollback before anything was sent",
			run: func(ctx context.Context, tx store.Tx) error {
				return tx.Rollback()
			},
			want: map[string]int64{},
		},
		{
			name: "commit with nothing sent",
			run: func(ctx context.Context, tx store.Tx) error {
				return tx.Commit(ctx, nil)
			},
			want: map[string]int64{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pipelineTestPool(t)
			tx, err := beginPipelined(pool)(ctx)
			require.NoError(t, err)
			err = c.run(ctx, tx)
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.NoError(t, tx.Rollback(), "rollback after the end is a no-op")
			// The single connection is back in the pool, outside any
			// transaction, and usable.
			require.Equal(t, c.want, readKV(t, pool))
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus())
			conn.Release()
		})
	}
}
