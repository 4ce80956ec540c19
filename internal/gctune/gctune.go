// Package gctune sets the garbage collector's target from the size of the
// live heap, so that a small heap is collected seldom and a large one
// without growing several times over.
//
// Go's one knob, GOGC, is a ratio: the heap may grow by that percentage of
// what survived the last collection before the next. hopper's live heap is
// small when it is busy (its state is in the database; its garbage is
// per-request), where Go's default ratio of 100 collects so often that the
// server spends a tenth more CPU a task, and large when ten thousand
// workers are parked on it, where a ratio of 400 holds five times the
// parked calls' memory. So the heap may grow to twice what survived, as
// Go's default lets it, but in any case to MinGoal: GOGC between 100 and
// 400, the ratio hopper once set for good (a small heap collected more
// lazily still only grows faster while ten thousand workers arrive).
package gctune

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

const (
	// MinGoal is the heap size a collection may always wait for.
	MinGoal = 64 << 20
	// MinPercent and MaxPercent bound the ratio set: never more eager
	// than Go's default, never lazier than 5× the live heap.
	MinPercent = 100
	MaxPercent = 400
	// every is how often the live heap is looked at.
	every = time.Second
)

// Percent is the GOGC ratio that lets a heap of live bytes grow to MinGoal,
// or to twice its size if that is more.
func Percent(live uint64) int {
	if live == 0 {
		return MaxPercent
	}
	if live >= MinGoal/2 {
		return MinPercent
	}
	return int(min(max((MinGoal-live)*100/live, MinPercent), MaxPercent))
}

// Start looks at the live heap every second and sets the collector's ratio
// (runtime/debug.SetGCPercent) to Percent of it, when that changes by a
// tenth or more. The returned stop ends it.
func Start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { run(ctx) })
	return func() {
		cancel()
		wg.Wait()
	}
}

func run(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := 0
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if p := Percent(sample[0].Value.Uint64()); current == 0 || p*10 < current*9 || p*10 > current*11 {
				debug.SetGCPercent(p)
				current = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
