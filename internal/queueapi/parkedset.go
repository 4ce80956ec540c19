package queueapi

import (
	"container/heap"
	"sync"
	"time"
)

// parkedClaims are the parked calls, by the time their long-polls end
// (a heap): one timer, set for the soonest, ends them all, instead of a
// timer per call.
type parkedClaims struct {
	mu       sync.Mutex
	byEnd    parkedHeap
	timer    *time.Timer // set for the soonest deadline while any call is parked
	draining bool
}

// parkedHeap orders parked calls by deadline; each knows its index.
type parkedHeap []*parkedClaim

func (h parkedHeap) Len() int           { return len(h) }
func (h parkedHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h parkedHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *parkedHeap) Push(x any) {
	pc := x.(*parkedClaim)
	pc.index = len(*h)
	*h = append(*h, pc)
}
func (h *parkedHeap) Pop() any {
	old := *h
	pc := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	pc.index = -1
	return pc
}

// endingWorkers bounds the goroutines that answer the calls whose
// long-polls ended together: a fleet that parked within a second ends
// within a second, and ten thousand replies written side by side would
// only hold ten thousand goroutines at once. Writing a reply seldom
// blocks (it fits the socket's buffer), so a few suffice.
const endingWorkers = 8

// add parks pc; it returns false when draining.
func (p *parkedClaims) add(pc *parkedClaim) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining {
		return false
	}
	heap.Push(&p.byEnd, pc)
	if pc.index == 0 {
		p.armLocked()
	}
	return true
}

// remove unparks pc if it is still parked.
func (p *parkedClaims) remove(pc *parkedClaim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.index < 0 {
		return
	}
	first := pc.index == 0
	heap.Remove(&p.byEnd, pc.index)
	if first {
		p.armLocked()
	}
}

// armLocked sets the timer for the soonest deadline, or stops it when no
// call is parked: an idle server has no timer running.
func (p *parkedClaims) armLocked() {
	if len(p.byEnd) == 0 {
		if p.timer != nil {
			p.timer.Stop()
		}
		return
	}
	d := time.Until(p.byEnd[0].deadline)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.expire)
		return
	}
	p.timer.Reset(d)
}

// expire ends the calls whose long-polls are over, with no task.
func (p *parkedClaims) expire() {
	now := time.Now()
	var ended []*parkedClaim
	p.mu.Lock()
	for len(p.byEnd) > 0 && !p.byEnd[0].deadline.After(now) {
		ended = append(ended, heap.Pop(&p.byEnd).(*parkedClaim))
	}
	p.armLocked()
	p.mu.Unlock()
	finishAll(ended)
}

// drain answers every parked call with no task and refuses new ones.
func (p *parkedClaims) drain() {
	var ended []*parkedClaim
	p.mu.Lock()
	p.draining = true
	for len(p.byEnd) > 0 {
		ended = append(ended, heap.Pop(&p.byEnd).(*parkedClaim))
	}
	p.armLocked()
	p.mu.Unlock()
	finishAll(ended)
}

// len counts the parked calls.
func (p *parkedClaims) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byEnd)
}

// finishAll answers the calls with no task, endingWorkers at a time,
// without waiting for them.
func finishAll(calls []*parkedClaim) {
	if len(calls) == 0 {
		return
	}
	next := make(chan *parkedClaim, len(calls))
	for _, pc := range calls {
		next <- pc
	}
	close(next)
	for range min(endingWorkers, len(calls)) {
		go func() {
			for pc := range next {
				pc.finish(emptyClaim{}, nil)
			}
		}()
	}
}
