package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// testPendingWithRoute checks the built-in superseder's candidate query
// (store.SupersederStore): only pending, claimable tasks of the queue with
// exactly that route, in creation order with taskId ties, and the limit
// keeping the most recently queued ones.
func testPendingWithRoute(t *testing.T, open Opener) {
	e := setup(t, open)
	ctx, s := e.ctx, e.s
	epoch := Epoch
	// A key with every character LIKE or JSON encoding treats
	// specially.
	const odd = `coalesce.v1.a%b_c&<d>"e\f`
	create := func(id, taskQueueID string, created time.Duration, routes ...string) {
		def := NewTask(taskQueueID, epoch.Add(created), func(tk *queue.Task) {
			tk.Routes = routes
			tk.Deadline = queue.NewTime(epoch.Add(time.Hour))
		})
		_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: def, Now: epoch.Add(created)})
		require.NoError(t, err)
	}
	// Creation order differs from queueing order on purpose.
	create("cccccccccccccccccccccA", "prov/wt", 3*time.Second, "coalesce.v1.k")
	create("aaaaaaaaaaaaaaaaaaaaaA", "prov/wt", 1*time.Second, "other", "coalesce.v1.k")
	create("bbbbbbbbbbbbbbbbbbbbbA", "prov/wt", 2*time.Second, "coalesce.v1.k")
	create("BBBBBBBBBBBBBBBBBBBBBA", "prov/wt", 2*time.Second, "coalesce.v1.k") // tie on created
	create("dddddddddddddddddddddA", "prov/wt", 4*time.Second, "coalesce.v1.kk")
	create("eeeeeeeeeeeeeeeeeeeeeA", "prov/wt", 5*time.Second, "coalesce.v1.K")
	create("fffffffffffffffffffffA", "prov/other", 6*time.Second, "coalesce.v1.k")
	create("gggggggggggggggggggggA", "prov/wt", 7*time.Second, "coalesce.v1.k")
	create("hhhhhhhhhhhhhhhhhhhhhA", "prov/wt", 8*time.Second, odd)
	create("iiiiiiiiiiiiiiiiiiiiiA", "prov/wt", 9*time.Second, `coalesce.v1.aXbYc&<d>"e\f`)
	// g is running, so it is no candidate.
	_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: "gggggggggggggggggggggA", Now: epoch.Add(10 * time.Second),
		Apply: func(tk *queue.TaskState, tr *queue.Transition) error {
			return tk.Claim(0, "wg", "w1", epoch.Add(10*time.Second), epoch.Add(time.Minute), tr)
		}})
	require.NoError(t, err)

	ids := func(entries []store.PendingEntry) []string {
		out := []string{}
		for _, e := range entries {
			out = append(out, e.Task.TaskID)
			require.Equal(t, 0, e.RunID)
			require.Equal(t, e.Task.Runs[0].Scheduled.Time, e.Inserted)
		}
		return out
	}
	tests := []struct {
		name, queue, route string
		now                time.Duration
		limit              int
		want               []string
	}{
		{name: "all candidates in creation order", queue: "prov/wt", route: "coalesce.v1.k", now: 20 * time.Second,
			want: []string{"aaaaaaaaaaaaaaaaaaaaaA", "BBBBBBBBBBBBBBBBBBBBBA", "bbbbbbbbbbbbbbbbbbbbbA", "cccccccccccccccccccccA"}},
		{name: "limit keeps the most recently queued", queue: "prov/wt", route: "coalesce.v1.k", now: 20 * time.Second, limit: 1,
			want: []string{"cccccccccccccccccccccA"}},
		{name: "other queue", queue: "prov/other", route: "coalesce.v1.k", now: 20 * time.Second,
			want: []string{"fffffffffffffffffffffA"}},
		{name: "case matters", queue: "prov/wt", route: "coalesce.v1.K", now: 20 * time.Second,
			want: []string{"eeeeeeeeeeeeeeeeeeeeeA"}},
		{name: "wildcards and escapes are literal", queue: "prov/wt", route: odd, now: 20 * time.Second,
			want: []string{"hhhhhhhhhhhhhhhhhhhhhA"}},
		{name: "no match", queue: "prov/wt", route: "coalesce.v1.none", now: 20 * time.Second, want: []string{}},
		{name: "deadline passed", queue: "prov/wt", route: "coalesce.v1.k", now: 2 * time.Hour, want: []string{}},
	}
	for _, tt := range tests {
		got, err := s.PendingWithRoute(ctx, store.PendingWithRouteParams{TaskQueueID: tt.queue, Route: tt.route, Now: epoch.Add(tt.now), Limit: tt.limit})
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, ids(got), tt.name)
	}
}
