package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// HistoryIndexes are the indexes migration 013 added to find past tasks
// (store.HistoryStore): those of task_group_members, written when a task
// is created, and the partial ones of tasks, written when it resolves.
// The history benchmarks drop them from a second store to measure what
// they cost.
var HistoryIndexes = []string{
	"task_group_members_created", "task_group_members_queue_created",
	"tasks_resolved_created", "tasks_resolved_queue_created",
}

// BenchHistoryCost measures what the history's indexes cost a task: each
// iteration creates a task (and, with life set, claims and completes it)
// in a store with them (with) and in one without them (without), in
// turns, the first of the pair alternating. Paired and interleaved, both
// stores see the same load, which on a shared machine varies by more
// than the difference; the medians of each and of the differences are
// reported (with-µs/op, without-µs/op, extra-µs/op). Each store first
// holds prefill tasks (copies through its filler, which may be nil when
// prefill is 0); tasks are created a millisecond apart, in groups of 100,
// so that the time indexes grow at their end as they do.
func BenchHistoryCost(b *testing.B, with, without store.Store, fillWith, fillWithout BulkFiller, prefill int, life bool) {
	ctx := context.Background()
	if prefill > 0 {
		for _, s := range []struct {
			st   store.Store
			fill BulkFiller
		}{{with, fillWith}, {without, fillWithout}} {
			if _, err := s.st.CreateTask(ctx, store.CreateTaskParams{TaskID: "seed", Task: NewTask(testQueue, Epoch, withGroup("seed-group")), Now: Epoch}); err != nil {
				b.Fatal(err)
			}
			s.fill(b, "seed", prefill)
		}
	}
	one := func(s store.Store, i int) time.Duration {
		now := Epoch.Add(time.Duration(i) * time.Millisecond)
		id := fmt.Sprintf("created-%d", i)
		task := NewTask(testQueue, now, withGroup(fmt.Sprintf("group-%d", i/100)), func(t *queue.Task) { t.Metadata.Name = fmt.Sprintf("build %d", i) })
		start := time.Now()
		if _, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: task, Now: now}); err != nil {
			b.Fatal(err)
		}
		if life {
			res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
				Count: 1, Now: now, TakenUntil: now.Add(claimTimeout)})
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Claims) != 1 || res.Claims[0].Task.TaskID != id {
				b.Fatalf("claimed %d tasks, want %s", len(res.Claims), id)
			}
			if _, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportCompleted(0, now, tr)
			}}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var withs, withouts, extras []float64
	i := 0
	for b.Loop() {
		var w, wo time.Duration
		if i%2 == 0 {
			w, wo = one(with, i), one(without, i)
		} else {
			wo, w = one(without, i), one(with, i)
		}
		withs, withouts, extras = append(withs, us(w)), append(withouts, us(wo)), append(extras, us(w)-us(wo))
		i++
	}
	b.ReportMetric(median(withs), "with-µs/op")
	b.ReportMetric(median(withouts), "without-µs/op")
	b.ReportMetric(median(extras), "extra-µs/op")
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
