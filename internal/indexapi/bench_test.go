package indexapi_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/index"
	"github.com/hopper-ci/hopper/internal/indexapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// serve runs the API (queue plus index routes) over st with production
// security and returns a root client of it.
func serve(tb testing.TB, st store.Store) *tcclient.Client {
	tb.Helper()
	return apitest.Start(tb, apitest.Options{Store: st, Routes: func(s *apitest.Server) []api.Route {
		return indexapi.Routes(indexapi.Deps{Store: s.Store, Artifacts: s.Queue})
	}}).Root
}

// benchPath is the i-th path of a tree of 100 projects × 100 branches ×
// 10 builds: project.<p>.branch.<b>.build<n>.
func benchPath(i int) string {
	return fmt.Sprintf("project.p%02d.branch.b%02d.build%d", i%100, (i/100)%100, i/10000)
}

// BenchmarkFindTask measures findTask over HTTP (Hawk-signed by the root
// client, verified by the server) against a store holding 100,000
// entries, and reports the p50 and p99 latencies of the calls: on SQLite,
// and on PostgreSQL when HOPPER_TEST_POSTGRES is set.
func BenchmarkFindTask(b *testing.B) {
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			st, _ := apitest.OpenStore(b, driver)
			benchFindTask(b, st)
		})
	}
}

func benchFindTask(b *testing.B, st store.Store) {
	ctx := context.Background()
	const entries = 100_000
	expires := time.Now().Add(24 * time.Hour)
	// Filled by 8 writers: SQLite takes them in turn, PostgreSQL side by
	// side.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < entries; i += 8 {
				ns, name := index.Split(benchPath(i))
				if _, err := st.InsertIndexedTask(ctx, index.Entry{Namespace: ns, Name: name, TaskID: tcclient.NewTaskID(), Expires: expires, Rank: float64(i)}, time.Now()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(b, <-errs)
	c := serve(b, st)
	// Warm the connection and the caches (credentials, roles).
	_, err := c.FindIndexedTask(ctx, benchPath(0))
	require.NoError(b, err)
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		path := benchPath((i * 7919) % entries)
		start := time.Now()
		e, err := c.FindIndexedTask(ctx, path)
		durations = append(durations, time.Since(start))
		if err != nil || e.Namespace != path {
			b.Fatalf("findTask %s: %v", path, err)
		}
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
}
