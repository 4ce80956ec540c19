package store

import "testing"

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

// TestHubNotifyAll wakes every waiter of every queue, once.
func TestHubNotifyAll(t *testing.T) {
	h := NewHub()
	a, cancelA := h.Subscribe("q", 1)
	defer cancelA()
	b, cancelB := h.Subscribe("r", 5)
	defer cancelB()
	h.NotifyAll()
	h.NotifyAll()
	if !woken(a) || !woken(b) {
		t.Fatal("every waiter must be woken")
	}
	if woken(a) || woken(b) {
		t.Fatal("a waiter holds at most one wake-up")
	}
}
