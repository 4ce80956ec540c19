package githubapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// BenchmarkWebhookToTasks measures a push from the webhook's POST to its
// task created and its build recorded (the delivery stored, processed:
// .taskcluster.yml fetched from the local GitHub, rendered, the task
// created through the queue), one delivery after another on SQLite. It
// reports the latency's p50 and p99 and the deliveries per second.
func BenchmarkWebhookToTasks(b *testing.B) {
	bd := setup(b)
	ctx := context.Background()
	push := example(b, "push", 4)
	sha := push["after"].(string)
	bd.gh.Install("Codertocat", "Hello-World", 1)
	bd.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	bd.role(b, "repo:github.com/Codertocat/Hello-World:branch:master")
	body, err := json.Marshal(push)
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if status, text := bd.deliver(b, "push", uuid.NewString(), body, webhookSecret); status != http.StatusNoContent {
			b.Fatalf("%d %s", status, text)
		}
		n, err := bd.svc.ProcessDue(ctx)
		if err != nil || n != 1 {
			b.Fatalf("processed %d: %v", n, err)
		}
		took = append(took, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(took))/elapsed.Seconds(), "deliveries/s")
}

// BenchmarkSustainedDeliveries posts deliveries from several clients at
// once while two processors (replicas) drain the store, and checks at the
// end that every delivery made its build: deliveries per second with no
// loss.
func BenchmarkSustainedDeliveries(b *testing.B) {
	bd := setup(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	push := example(b, "push", 4)
	sha := push["after"].(string)
	bd.gh.Install("Codertocat", "Hello-World", 1)
	bd.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
	bd.role(b, "repo:github.com/Codertocat/Hello-World:branch:master")
	body, err := json.Marshal(push)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	for range 2 {
		replica := *bd.svc
		go func() {
			for ctx.Err() == nil {
				if _, err := replica.ProcessDue(ctx); err != nil && ctx.Err() == nil {
					b.Error(err)
				}
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
	start := time.Now()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if status, text := bd.deliver(b, "push", uuid.NewString(), body, webhookSecret); status != http.StatusNoContent {
				b.Errorf("%d %s", status, text)
			}
		}
	})
	// Wait for the processors to drain what was accepted.
	want := b.N
	n := 0
	err = testclock.Poll(ctx, 5*time.Minute, func() bool {
		builds, _, err := bd.store.ListGithubBuilds(ctx, store.GithubBuildFilter{}, store.Page{Limit: 1})
		if err != nil {
			b.Fatal(err)
		}
		if len(builds) > 0 {
			all, _, _ := bd.store.ListGithubBuilds(ctx, store.GithubBuildFilter{}, store.Page{Limit: want + 1})
			n = len(all)
		}
		return n >= want
	})
	if err != nil {
		b.Fatalf("%d of %d deliveries made a build: %v", n, want, err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	close(done)
	b.ReportMetric(float64(want)/elapsed.Seconds(), "deliveries/s")
}
