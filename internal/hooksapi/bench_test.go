package hooksapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkTriggerHook measures triggerHook over HTTP on SQLite: Hawk
// authentication, payload validation against the triggerSchema, JSON-e
// rendering, createTask with the hook's role and the fire record.
func BenchmarkTriggerHook(b *testing.B) {
	bu := setup(b)
	bu.hookRole(b, "g")
	bu.createHook(b, "g", "h", nil, taskTemplate(""))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bu.root.TriggerHook(ctx, "g", "h", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFireDue measures the scheduler firing due hooks on SQLite: per
// hook, the claim, rendering, createTask and the fire record with the move
// to the next due time.
func BenchmarkFireDue(b *testing.B) {
	bu := setup(b)
	bu.hookRole(b, "g")
	const hooks = 200
	for i := range hooks {
		bu.createHook(b, "g", fmt.Sprintf("h%d", i), []string{"0 * * * * *"}, taskTemplate(""))
	}
	due := bu.nextDue(b, "g", "h0")
	fired := 0
	b.ResetTimer()
	for i := 0; fired < b.N; i++ {
		bu.clock.Set(due.Add(time.Duration(i)*time.Minute + time.Second))
		n, err := bu.firer.FireDue(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		fired += n
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(fired), "µs/fire")
}
