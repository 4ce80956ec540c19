package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		t.Helper()
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hopper.db"))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db
	})
}
