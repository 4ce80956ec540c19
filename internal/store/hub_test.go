package store

import (
	"testing"
	"time"
)

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestHubWakesByCapacity: a notification wakes the longest-waiting
// waiters until their capacities cover the new runs, and no one else.
func TestHubWakesByCapacity(t *testing.T) {
	tests := []struct {
		name       string
		capacities []int
		runs       int
		want       []bool
	}{
		{"one run, one waiter of many", []int{1, 1, 1}, 1, []bool{true, false, false}},
		{"runs for two", []int{1, 1, 1}, 2, []bool{true, true, false}},
		{"a big waiter covers them", []int{32, 1, 1}, 5, []bool{true, false, false}},
		{"a small waiter first, then a big one", []int{1, 4, 1}, 5, []bool{true, true, false}},
		{"more runs than waiters", []int{1, 1}, 9, []bool{true, true}},
		{"nothing new", []int{1}, 0, []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub()
			var chans []<-chan struct{}
			for _, c := range tc.capacities {
				ch, cancel := h.Subscribe("q", c)
				defer cancel()
				chans = append(chans, ch)
			}
			h.Notify("q", tc.runs)
			h.Notify("other", 100)
			for i, ch := range chans {
				if got := woken(ch); got != tc.want[i] {
					t.Errorf("waiter %d woken = %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}
}

// TestHubTakesTurns: a woken waiter that waits again goes behind the
// others, and a waiter holding a wake-up is skipped.
func TestHubTakesTurns(t *testing.T) {
	h := NewHub()
	a, cancelA := h.Subscribe("q", 1)
	defer cancelA()
	b, cancelB := h.Subscribe("q", 1)
	defer cancelB()
	h.Notify("q", 1)
	h.Notify("q", 1) // a still holds its wake-up: b gets this one
	if !woken(a) || !woken(b) {
		t.Fatal("two notifications must wake both waiters")
	}
	h.Notify("q", 1)
	h.Notify("q", 1)
	h.Notify("q", 1) // both hold one already: nothing more to give
	if !woken(a) || !woken(b) {
		t.Fatal("each waiter should have had its turn again")
	}
	if woken(a) || woken(b) {
		t.Fatal("a waiter holds at most one wake-up")
	}
}

// TestHubPassesOnUnusedWakeUps: a waiter leaving with a wake-up it never
// took hands it to the next waiter, so no new run is left unclaimed.
func TestHubPassesOnUnusedWakeUps(t *testing.T) {
	h := NewHub()
	_, cancelA := h.Subscribe("q", 1)
	b, cancelB := h.Subscribe("q", 1)
	defer cancelB()
	h.Notify("q", 1) // wakes a
	if woken(b) {
		t.Fatal("b woken before a left")
	}
	cancelA()
	if !woken(b) {
		t.Fatal("a left without claiming: its wake-up must go to b")
	}
	cancelA() // twice is harmless
	h.Notify("q", 1)
	if !woken(b) {
		t.Fatal("b is still subscribed")
	}
}

// TestHubNotifyAll wakes the longest-waiting waiter of every queue, once:
// one that claims all it asked for wakes the next (ClaimWork).
func TestHubNotifyAll(t *testing.T) {
	h := NewHub()
	a, cancelA := h.Subscribe("q", 1)
	defer cancelA()
	a2, cancelA2 := h.Subscribe("q", 1)
	defer cancelA2()
	b, cancelB := h.Subscribe("r", 5)
	defer cancelB()
	h.markEmpty("q", 0)
	h.NotifyAll()
	if !woken(a) || !woken(b) || woken(a2) {
		t.Fatal("the first waiter of every queue, and only it, must be woken")
	}
	if _, empty := h.knownEmpty("q"); empty {
		t.Fatal("after NotifyAll no queue is known to be empty")
	}
}

// TestHubKnownEmpty: a claim that found the queue drained marks it empty
// unless a notification came since the claim began; a later notification
// clears the mark unless the waiters it woke take every run it announced
// (they look whatever the mark says, and the calls arriving meanwhile need
// not race them); a queue without waiters knows nothing.
func TestHubKnownEmpty(t *testing.T) {
	tests := []struct {
		name      string
		notifyMid bool // a run announced while the claim ran
		thenRuns  int  // runs announced after the claim
		busy      bool // the only waiter already holds a wake-up then
		want      bool
	}{
		{"drained", false, 0, false, true},
		{"a run came during the claim", true, 0, false, false},
		{"a run came afterwards for the waiter", false, 1, false, true},
		{"more runs came afterwards than the waiter takes", false, 2, false, false},
		{"a run came afterwards with no waiter to wake", false, 1, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub()
			_, cancel := h.Subscribe("q", 1)
			defer cancel()
			gen, empty := h.knownEmpty("q")
			if empty {
				t.Fatal("a new queue is not known to be empty")
			}
			if tc.notifyMid {
				h.Notify("q", 1)
			}
			h.markEmpty("q", gen)
			if tc.busy {
				h.Notify("q", 1)
				gen, _ := h.knownEmpty("q")
				h.markEmpty("q", gen)
			}
			if tc.thenRuns > 0 {
				h.Notify("q", tc.thenRuns)
			}
			if _, got := h.knownEmpty("q"); got != tc.want {
				t.Fatalf("known empty = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("a woken call that did not claim", func(t *testing.T) {
		h := NewHub()
		_, cancel := h.Subscribe("q", 1)
		defer cancel()
		h.markEmpty("q", 0)
		h.Notify("q", 1)
		h.forgetEmpty("q")
		if _, empty := h.knownEmpty("q"); empty {
			t.Fatal("forgetEmpty must clear the mark")
		}
	})
	t.Run("a woken waiter leaving", func(t *testing.T) {
		h := NewHub()
		_, cancelA := h.Subscribe("q", 1)
		b, cancelB := h.Subscribe("q", 1)
		defer cancelB()
		h.markEmpty("q", 0)
		h.Notify("q", 1)
		cancelA() // the wake-up it holds goes to b
		if !woken(b) {
			t.Fatal("the wake-up must pass on to the next waiter")
		}
		if _, empty := h.knownEmpty("q"); !empty {
			t.Fatal("the run is b's to claim: the queue stays known empty")
		}
	})
	h := NewHub()
	h.markEmpty("q", 0)
	if _, empty := h.knownEmpty("q"); empty {
		t.Fatal("a queue without waiters must not be known empty")
	}
}

// TestHubBackup: a queue with waiters has one of them look every
// backupEvery, and forgets that it is empty; the timer stops with the
// last waiter.
func TestHubBackup(t *testing.T) {
	h := NewHub()
	h.backupEvery = 10 * time.Millisecond
	a, cancelA := h.Subscribe("q", 1)
	b, cancelB := h.Subscribe("q", 1)
	gen, _ := h.knownEmpty("q")
	h.markEmpty("q", gen)
	select {
	case <-a:
	case <-time.After(5 * time.Second):
		t.Fatal("the backup timer never woke the first waiter")
	}
	if _, empty := h.knownEmpty("q"); empty {
		t.Fatal("the backup must clear the empty mark")
	}
	select {
	case <-b:
	case <-time.After(5 * time.Second):
		t.Fatal("the next backup should wake the next waiter")
	}
	cancelA()
	cancelB()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.queues) != 0 {
		t.Fatal("a queue without waiters must be forgotten")
	}
}

// TestHubSubscribeFunc: a waiter without a goroutine of its own is told of
// each wake-up put in its channel, and only then.
func TestHubSubscribeFunc(t *testing.T) {
	h := NewHub()
	calls := make(chan struct{}, 4)
	ch, cancel := h.SubscribeFunc("q", 1, func() { calls <- struct{}{} })
	defer cancel()
	h.Notify("other", 1)
	select {
	case <-calls:
		t.Fatal("told of another queue's run")
	case <-time.After(20 * time.Millisecond):
	}
	h.Notify("q", 1)
	select {
	case <-calls:
	case <-time.After(5 * time.Second):
		t.Fatal("never told of its wake-up")
	}
	if !woken(ch) {
		t.Fatal("the wake-up must be in the channel when the waiter is told")
	}
	h.Notify("q", 1)
	h.Notify("q", 1) // holds one already: not told twice
	<-calls
	select {
	case <-calls:
		t.Fatal("told of a wake-up it could not hold")
	case <-time.After(20 * time.Millisecond):
	}
}

// BenchmarkHubFleetRepoll is one worker of a 10,000-strong idle fleet
// polling again: it joins its queue's waiters and the previous poll's
// subscription leaves. The cost must not grow with the fleet.
func BenchmarkHubFleetRepoll(b *testing.B) {
	const fleet = 10000
	h := NewHub()
	cancels := make([]func(), 0, fleet)
	for range fleet {
		_, cancel := h.Subscribe("prov/fleet", 1)
		cancels = append(cancels, cancel)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		_, cancel := h.Subscribe("prov/fleet", 1)
		cancels[i%fleet]()
		cancels[i%fleet] = cancel
	}
}
