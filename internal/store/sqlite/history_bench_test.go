package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

// openHistory opens a store on a fresh file, without the history's
// indexes unless history is set.
func openHistory(b *testing.B, history bool) (*store.DB, string) {
	path := filepath.Join(b.TempDir(), "hopper.db")
	s := openFile(b, path)
	if !history {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		require.NoError(b, err)
		defer db.Close()
		for _, idx := range storetest.HistoryIndexes {
			_, err := db.Exec("DROP INDEX " + idx)
			require.NoError(b, err)
		}
	}
	return s, path
}

// BenchmarkHistoryCost: what finding past tasks costs each task, with
// migration 013's indexes against without (storetest.BenchHistoryCost):
// its createTask on an empty store and on one holding 100,000 tasks, and
// its whole life (createTask, claimWork, reportCompleted).
func BenchmarkHistoryCost(b *testing.B) {
	for _, c := range []struct {
		name    string
		prefill int
		life    bool
	}{{"create/tasks=0", 0, false}, {"create/tasks=100000", 100_000, false}, {"life/tasks=0", 0, true}} {
		b.Run(c.name, func(b *testing.B) {
			with, withPath := openHistory(b, true)
			without, withoutPath := openHistory(b, false)
			storetest.BenchHistoryCost(b, with, without, bulkFiller(withPath), bulkFiller(withoutPath), c.prefill, c.life)
		})
	}
}
