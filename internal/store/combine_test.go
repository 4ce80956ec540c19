package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestCombinerBatchesWhileBusy: calls arriving while every slot is busy
// run together as the next batch, and a lone call runs at once.
func TestCombinerBatchesWhileBusy(t *testing.T) {
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		batches [][]int
	)
	c := newCombiner(1, 32, func(calls []int) {
		if calls[0] == 0 {
			<-release // the first batch holds the slot until released
		}
		mu.Lock()
		batches = append(batches, append([]int(nil), calls...))
		mu.Unlock()
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.do(0) }()
	testclock.WaitFor(t, time.Minute, "one batch running", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.running == 1 })
	for i := 1; i <= 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); c.do(i) }()
	}
	testclock.WaitFor(t, time.Minute, "five calls waiting", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.waiting) == 5 })
	close(release)
	wg.Wait()
	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 5 {
		t.Fatalf("batches = %v, want [[0] [five calls]]", batches)
	}
	if c.running != 0 || len(c.waiting) != 0 {
		t.Fatalf("combiner not idle after the calls: running %d, waiting %d", c.running, len(c.waiting))
	}
	c.do(9) // idle again: runs alone, at once
	if last := batches[len(batches)-1]; len(last) != 1 || last[0] != 9 {
		t.Fatalf("lone call ran as %v", last)
	}
}

// TestCombinerRunsEveryCallOnce under heavy concurrency, with batches
// bounded in size and in number running at once.
func TestCombinerRunsEveryCallOnce(t *testing.T) {
	const calls, limit, size = 2000, 3, 7
	var (
		ran     [calls]atomic.Int32
		running atomic.Int32
		peak    atomic.Int32
	)
	c := newCombiner(limit, size, func(batch []int) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if len(batch) > size {
			t.Errorf("batch of %d, more than %d", len(batch), size)
		}
		for _, i := range batch {
			ran[i].Add(1)
		}
		time.Sleep(50 * time.Microsecond)
	})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() { defer wg.Done(); c.do(i) }()
	}
	wg.Wait()
	for i := range calls {
		if n := ran[i].Load(); n != 1 {
			t.Fatalf("call %d ran %d times", i, n)
		}
	}
	if p := peak.Load(); p > limit {
		t.Fatalf("%d batches ran at once, limit %d", p, limit)
	}
}
