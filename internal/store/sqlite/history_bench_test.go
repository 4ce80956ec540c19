package sqlite_test

import (
	"database/sql"
	"fmt"
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

// BenchmarkCreateTaskHistory: what finding past tasks costs each
// createTask (the task_group_members indexes of migration 013), on an
// empty store and one holding 100,000 tasks.
func BenchmarkCreateTaskHistory(b *testing.B) {
	for _, prefill := range []int{0, 100_000} {
		for _, history := range []bool{true, false} {
			b.Run(fmt.Sprintf("tasks=%d/history=%t", prefill, history), func(b *testing.B) {
				s, path := openHistory(b, history)
				storetest.BenchCreateTask(b, s, prefill, bulkFiller(path))
			})
		}
	}
}

// BenchmarkCreateClaimCompleteHistory: the same over a task's whole life,
// whose resolution writes the partial indexes of resolved tasks.
func BenchmarkCreateClaimCompleteHistory(b *testing.B) {
	for _, history := range []bool{true, false} {
		b.Run(fmt.Sprintf("history=%t", history), func(b *testing.B) {
			s, _ := openHistory(b, history)
			storetest.BenchCreateClaimComplete(b, s)
		})
	}
}
