package githubapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// BenchmarkReporterQueries counts the statements the forge reporter sends
// to PostgreSQL with 1,000 pending builds (a task each) and 3 replicas,
// each running one reporting pass per round (the duty's default tick is a
// second, so a round's statements are its statements per second): idle,
// no task changing, and while 10 tasks resolve per round. The replicas
// have stores of their own; only theirs are counted, not the queue's
// work of resolving the tasks.
func BenchmarkReporterQueries(b *testing.B) {
	url := os.Getenv("HOPPER_TEST_POSTGRES")
	if url == "" {
		b.Skip("HOPPER_TEST_POSTGRES not set")
	}
	const builds, replicas, resolvedPerRound = 1000, 3, 10
	ctx := context.Background()
	schema := fmt.Sprintf("hopper_reporter_bench_%d", time.Now().UnixNano()%1e9)
	b.Cleanup(func() {
		if conn, err := pgx.Connect(context.Background(), url); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	open := func(tracer pgx.QueryTracer) store.Store {
		db, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, MaxConns: 4, Tracer: tracer,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(b, err)
		b.Cleanup(func() { _ = db.Close() })
		return db
	}
	bd := setupOn(b, open(nil))
	bd.gh.Install("Codertocat", "Hello-World", 1)

	// 1,000 builds of one pending task each, recorded as one delivery's.
	now := bd.clock.Now()
	var recorded []store.GithubBuild
	var taskIDs []string
	for range builds {
		id := ident.NewSlugID()
		_, err := bd.root.CreateTaskDocument(ctx, id, map[string]any{
			"taskQueueId": testQueue, "schedulerId": github.SchedulerID, "taskGroupId": id, "routes": []string{"statuses"},
			"created": now.Format(time.RFC3339), "deadline": now.Add(24 * time.Hour).Format(time.RFC3339),
			"payload": map[string]any{}, "metadata": map[string]any{"name": "t", "description": "d", "owner": "a@b.c", "source": "https://example.com"},
		})
		require.NoError(b, err)
		taskIDs = append(taskIDs, id)
		recorded = append(recorded, store.GithubBuild{TaskGroupID: id, Host: "github.com", Organization: "Codertocat", Repository: "Hello-World",
			SHA: "0123456789abcdef0123456789abcdef01234567", State: github.StatePending, EventType: "push", EventID: uuid.NewString(),
			InstallationID: 1, Created: now, Updated: now})
	}
	d := &store.GithubDelivery{Host: "github.com", DeliveryID: uuid.NewString(), Forge: "github", Event: "push", Body: []byte("{}"), Received: now}
	_, err := bd.store.AddGithubDelivery(ctx, d)
	require.NoError(b, err)
	claimed, err := bd.store.ClaimGithubDelivery(ctx, now, now.Add(time.Minute))
	require.NoError(b, err)
	require.NoError(b, bd.store.FinishGithubDelivery(ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: claimed.ClaimedUntil, State: store.DeliveryDone, Now: now, Builds: recorded}))

	counter := &postgres.StatementTracer{}
	var svcs []func(context.Context) error
	for range replicas {
		replica := *bd.svc
		replica.Store = open(counter)
		svcs = append(svcs, replica.Report)
	}
	round := func() {
		for _, report := range svcs {
			require.NoError(b, report(ctx))
		}
	}
	round() // the first looks at everything once
	next := 0
	for _, resolving := range []bool{false, true} {
		name := "idle"
		if resolving {
			name = "resolving"
		}
		b.Run(name, func(b *testing.B) {
			var statements int64
			rounds := 0
			for b.Loop() {
				if resolving {
					b.StopTimer()
					resolve(b, bd, taskIDs[next:next+resolvedPerRound])
					next += resolvedPerRound
					b.StartTimer()
				}
				before := counter.Count()
				round()
				statements += counter.Count() - before
				rounds++
			}
			b.ReportMetric(float64(statements)/float64(rounds), "statements/round")
		})
	}
}

// resolve claims and completes the tasks (pending, of testQueue).
func resolve(b *testing.B, bd *bundle, taskIDs []string) {
	ctx := context.Background()
	for _, id := range taskIDs {
		_, err := bd.root.ClaimTask(ctx, id, 0, &tcclient.ClaimTaskRequest{WorkerGroup: "g", WorkerID: "w"})
		require.NoError(b, err)
		_, err = bd.root.ReportCompleted(ctx, id, 0)
		require.NoError(b, err)
	}
}
