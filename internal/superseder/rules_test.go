package superseder_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/superseder"
)

func TestSelect(t *testing.T) {
	t.Parallel()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	c := func(id string, created, arrived int) superseder.Candidate {
		return superseder.Candidate{TaskID: id, Created: at(created), Arrived: at(arrived)}
	}
	tests := []struct {
		name    string
		entries []superseder.Candidate
		req     string
		now     int
		age     time.Duration
		size    int
		max     int
		want    []string
		ok      bool
	}{
		{name: "ascending by created, ties by taskId", req: "r",
			entries: []superseder.Candidate{c("r", 10, 10), c("b", 20, 20), c("a", 20, 21), c("o", 5, 5)},
			now:     100, max: 32, ok: true, want: []string{"o", "r", "a", "b"}},
		{name: "requester alone", req: "r", entries: []superseder.Candidate{c("r", 10, 10)}, now: 100, max: 32,
			ok: true, want: []string{"r"}},
		{name: "size not exceeded", req: "r", entries: []superseder.Candidate{c("r", 10, 10), c("a", 20, 20)},
			now: 100, size: 2, max: 32},
		{name: "size exceeded", req: "r", entries: []superseder.Candidate{c("r", 10, 10), c("a", 20, 20)},
			now: 100, size: 1, max: 32, ok: true, want: []string{"r", "a"}},
		{name: "age not exceeded (equal)", req: "r", entries: []superseder.Candidate{c("r", 10, 40), c("a", 20, 30)},
			now: 100, age: 70 * time.Second, max: 32},
		{name: "age measured from the earliest arrival", req: "r", entries: []superseder.Candidate{c("r", 10, 40), c("a", 20, 29)},
			now: 100, age: 70 * time.Second, max: 32, ok: true, want: []string{"r", "a"}},
		{name: "cap keeps the requester and the newest others", req: "r",
			entries: []superseder.Candidate{c("r", 1, 1), c("a", 2, 2), c("b", 3, 3), c("c", 4, 4)},
			now:     100, max: 3, ok: true, want: []string{"r", "b", "c"}},
		{name: "cap with a newest requester", req: "r",
			entries: []superseder.Candidate{c("r", 9, 9), c("a", 2, 2), c("b", 3, 3), c("c", 4, 4)},
			now:     100, max: 2, ok: true, want: []string{"c", "r"}},
		{name: "cap of one", req: "r", entries: []superseder.Candidate{c("r", 1, 1), c("a", 2, 2)},
			now: 100, max: 1, ok: true, want: []string{"r"}},
		{name: "no candidates", req: "r", now: 100, max: 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := superseder.Select(tt.entries, tt.req, at(tt.now), tt.age, tt.size, tt.max)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}
