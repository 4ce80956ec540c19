package store

import (
	"slices"
	"testing"

	"github.com/hopper-ci/hopper/internal/queue"
)

func testOffer(id string, weight int) offer {
	return offer{task: &queue.TaskState{TaskID: id}, weight: weight}
}

func offerIDs(offers []offer) []string {
	ids := make([]string, len(offers))
	for i, o := range offers {
		ids[i] = o.task.TaskID
	}
	return ids
}

// TestHubOffers: a queue found drained keeps the runs its own creates make
// pending, highest priority first and then in order, until a run of a task
// it does not know is announced or its knowledge is otherwise lost.
func TestHubOffers(t *testing.T) {
	tests := []struct {
		name string
		// then runs after the queue was found drained and three tasks were
		// offered: a (weight 1), b (weight 3), c (weight 1).
		then      func(h *Hub)
		take      int
		wantExact bool
		want      []string
	}{
		{"priority, then the order made pending", nil, 3, true, []string{"b", "a", "c"}},
		{"fewer than offered", nil, 2, true, []string{"b", "a"}},
		{"a run of an unknown task", func(h *Hub) { h.Notify("q", 1) }, 3, false, nil},
		{"a woken call that failed", func(h *Hub) { h.forgetEmpty("q") }, 3, false, nil},
		{"a listener that reconnected", func(h *Hub) { h.NotifyAll() }, 3, false, nil},
		{"the backup look", func(h *Hub) { h.backup("q", h.queues["q"]) }, 3, false, nil},
		{"more offers than are kept", func(h *Hub) {
			h.notifyOffers("q", make([]offer, maxOffers))
		}, 3, false, nil},
		{"a later offer of higher priority", func(h *Hub) {
			h.notifyOffers("q", []offer{testOffer("d", 5)})
		}, 2, true, []string{"d", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub()
			_, cancel := h.Subscribe("q", 32)
			defer cancel()
			gen, _ := h.knownEmpty("q")
			h.markEmpty("q", gen)
			h.notifyOffers("q", []offer{testOffer("a", 1), testOffer("b", 3)})
			h.notifyOffers("q", []offer{testOffer("c", 1)})
			if tc.then != nil {
				tc.then(h)
			}
			got, exact := h.takeOffers("q", tc.take)
			if exact != tc.wantExact || !slices.Equal(offerIDs(got), tc.want) {
				t.Fatalf("takeOffers = %v, exact %v; want %v, exact %v", offerIDs(got), exact, tc.want, tc.wantExact)
			}
		})
	}

	t.Run("the last offer taken leaves the queue known empty", func(t *testing.T) {
		h := NewHub()
		_, cancel := h.Subscribe("q", 1)
		defer cancel()
		h.markEmpty("q", 0)
		h.notifyOffers("q", []offer{testOffer("a", 0)})
		if _, empty := h.knownEmpty("q"); empty {
			t.Fatal("a queue holding an offer is not empty")
		}
		if got, _ := h.takeOffers("q", 5); !slices.Equal(offerIDs(got), []string{"a"}) {
			t.Fatalf("took %v", offerIDs(got))
		}
		if got, exact := h.takeOffers("q", 5); !exact || len(got) != 0 {
			t.Fatalf("after the last offer: %v, exact %v; want none, exact", offerIDs(got), exact)
		}
		if _, empty := h.knownEmpty("q"); !empty {
			t.Fatal("the queue must be known empty")
		}
	})
	t.Run("never found drained", func(t *testing.T) {
		h := NewHub()
		_, cancel := h.Subscribe("q", 1)
		defer cancel()
		h.notifyOffers("q", []offer{testOffer("a", 0)})
		if got, exact := h.takeOffers("q", 1); exact || got != nil {
			t.Fatal("runs of a queue not known exactly are left to the database")
		}
	})
	t.Run("offers wake waiters by capacity", func(t *testing.T) {
		h := NewHub()
		a, cancelA := h.Subscribe("q", 1)
		defer cancelA()
		b, cancelB := h.Subscribe("q", 1)
		defer cancelB()
		c, cancelC := h.Subscribe("q", 1)
		defer cancelC()
		h.markEmpty("q", 0)
		h.notifyOffers("q", []offer{testOffer("x", 0), testOffer("y", 0)})
		if !woken(a) || !woken(b) || woken(c) {
			t.Fatal("two offers wake the two longest-waiting waiters of capacity 1")
		}
		h.takeOffers("q", 1)
		h.wakeForOffers("q")
		if !woken(c) {
			t.Fatal("an offer left after a full claim wakes another waiter")
		}
	})
	t.Run("no waiters", func(t *testing.T) {
		h := NewHub()
		h.notifyOffers("q", []offer{testOffer("a", 0)})
		if _, exact := h.takeOffers("q", 1); exact {
			t.Fatal("a queue without waiters keeps nothing")
		}
	})
}
