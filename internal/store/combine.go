package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// combiner merges concurrent calls into shared batches (group commit): a
// call that finds fewer than `limit` batches running starts one with every
// call waiting at that moment; otherwise it waits, and when a batch ends
// the calls that queued up meanwhile go together as the next one. Nothing
// ever waits for company: an idle combiner runs a lone call at once, and
// batches grow only while the database is busy, which is when sharing one
// transaction (and one set of statements) among many calls pays.
//
// No goroutine is started: the caller that finds a free slot runs the
// batch, and a caller finishing one hands the next batch to one of the
// waiting callers.
type combiner[C any] struct {
	limit int // batches running at once
	max   int // calls in one batch
	run   func(batch []C)

	mu      sync.Mutex
	running int
	waiting []*combined[C]

	// batches and calls count what ran, for metrics.
	batches, calls atomic.Uint64
}

type combined[C any] struct {
	call C
	lead chan []*combined[C] // a batch this caller is to run
	done chan struct{}       // closed once the call has been run by someone
}

func newCombiner[C any](limit, size int, run func([]C)) *combiner[C] {
	return &combiner[C]{limit: max(limit, 1), max: max(size, 1), run: run}
}

// do runs call, alone or in a batch, and returns once it has run.
func (c *combiner[C]) do(call C) {
	w := &combined[C]{call: call, lead: make(chan []*combined[C], 1), done: make(chan struct{})}
	c.mu.Lock()
	if c.running < c.limit {
		c.running++
		c.waiting = append(c.waiting, w)
		batch := c.takeLocked()
		c.mu.Unlock()
		c.execute(batch)
		<-w.done
		return
	}
	c.waiting = append(c.waiting, w)
	c.mu.Unlock()
	select {
	case batch := <-w.lead:
		c.execute(batch)
		<-w.done
	case <-w.done:
	}
}

// batchTimeout bounds a combined transaction: it no longer ends when one
// caller gives up, so it needs a limit of its own.
const batchTimeout = 30 * time.Second

// batchContext is the context a batch runs in: it outlives any one caller
// (the others' work rides on it), within batchTimeout.
func batchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
}

// takeLocked removes the next batch from the waiting calls, oldest first.
func (c *combiner[C]) takeLocked() []*combined[C] {
	n := min(len(c.waiting), c.max)
	batch := make([]*combined[C], n)
	copy(batch, c.waiting[:n])
	c.waiting = append(c.waiting[:0], c.waiting[n:]...)
	return batch
}

// execute runs a batch, releases its callers, and passes the running slot
// to the next batch if calls are waiting.
func (c *combiner[C]) execute(batch []*combined[C]) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
		c.mu.Lock()
		if len(c.waiting) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		next := c.takeLocked()
		c.mu.Unlock()
		next[0].lead <- next
	}()
	calls := make([]C, len(batch))
	for i, w := range batch {
		calls[i] = w.call
	}
	c.batches.Add(1)
	c.calls.Add(uint64(len(calls)))
	c.run(calls)
}
