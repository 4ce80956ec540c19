package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// TestTxRetriesContention: a transaction the dialect calls contended is run
// again, five runs in all, 5, 10, 15 and 20 ms apart; any other error ends
// it at once and is returned unchanged.
func TestTxRetriesContention(t *testing.T) {
	errContended := errors.New("contended")
	errOther := errors.New("other")
	sqlDB, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "tx.db"))
	require.NoError(t, err)
	t.Cleanup(func() { sqlDB.Close() })
	db := New(Dialect{Name: "sqlite", Retryable: func(err error) bool { return errors.Is(err, errContended) }}, sqlDB, sqlDB, nil)
	var waits []time.Duration
	saved := txRetry
	t.Cleanup(func() { txRetry = saved })
	txRetry.Sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		results []error // what run n returns; past the end, errContended
		runs    int
		waits   []time.Duration
		err     error
	}{
		{name: "commits first time", results: []error{nil}, runs: 1},
		{name: "commits after two contentions", results: []error{errContended, errContended, nil}, runs: 3, waits: []time.Duration{5 * ms, 10 * ms}},
		{name: "contended every time", runs: 5, waits: []time.Duration{5 * ms, 10 * ms, 15 * ms, 20 * ms}, err: errContended},
		{name: "other error is final", results: []error{errContended, errOther}, runs: 2, waits: []time.Duration{5 * ms}, err: errOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waits = nil
			runs := 0
			err := db.tx(context.Background(), func(tx *txn) error {
				runs++
				if runs <= len(tc.results) {
					return tc.results[runs-1]
				}
				return errContended
			})
			require.Equal(t, tc.runs, runs)
			require.Equal(t, tc.waits, waits)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.Same(t, tc.err, err, "returned unchanged")
		})
	}
}
