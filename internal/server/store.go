// Package server assembles a running hopper queue: the store, the API, the
// blob store, events, and the background resolvers, with graceful shutdown.
// cmd/hopper only parses flags and calls into it.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
)

// StoreOptions tune the store beyond its --db spec.
type StoreOptions struct {
	// Batches is how many combined update (and create) transactions run
	// at once on PostgreSQL; 0 is the driver's default, negative turns
	// combining off. SQLite has one writer and always combines.
	Batches int
}

// OpenStore opens the store a --db spec names: "sqlite:PATH", a
// "postgres://" or "postgresql://" URL, or "" for hopper.db in dataDir.
// Migrations are applied.
func OpenStore(ctx context.Context, spec, dataDir string, log *slog.Logger, opts StoreOptions) (*store.DB, error) {
	switch {
	case spec == "":
		return sqlite.Open(ctx, filepath.Join(dataDir, "hopper.db"))
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if path == "" {
			return nil, fmt.Errorf("--db sqlite: needs a path, e.g. sqlite:%s", filepath.Join(dataDir, "hopper.db"))
		}
		return sqlite.Open(ctx, path)
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return postgres.Open(ctx, spec, postgres.Options{Logger: log, Batches: opts.Batches})
	}
	scheme, _, _ := strings.Cut(spec, ":")
	return nil, fmt.Errorf("unknown --db %q: want sqlite:PATH or a postgres:// URL", scheme)
}
