package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// lister reads one page of some listing as comparable keys.
type lister func(e *env, page store.Page) ([]string, string, error)

// testPagination: every listing pages the same way, whatever its key.
func testPagination(t *testing.T, open Opener) {
	for _, tc := range append(taskListings(), recordListings()...) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			tc.setup(e)
			checkPages(t, e, tc.list, tc.want)
		})
	}
}

// listing is one listing the pagination test walks: what to store, how to
// list it, and the keys it lists, in order.
type listing struct {
	name  string
	setup func(e *env)
	list  lister
	want  []string
}

// five returns prefix0 … prefix4.
func five(prefix string) []string {
	var out []string
	for i := range 5 {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// taskListings are the listings of tasks: pending and claimed in a queue,
// a group's members, a task's dependents.
func taskListings() []listing {
	ms := func(n int) time.Time { return Epoch.Add(time.Duration(n) * time.Millisecond) }
	// Ties on the time cross page boundaries, so the taskId tie-break of
	// the (time, taskId) cursors is exercised.
	tieTimes := []time.Time{ms(0), ms(1), ms(1), ms(1), ms(2)}
	return []listing{
		{
			name: "ListPending",
			setup: func(e *env) {
				for i, id := range five("p") {
					e.create(id, tieTimes[i])
				}
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				entries, next, err := e.s.ListPending(e.ctx, testQueue, Epoch, page)
				var keys []string
				for _, en := range entries {
					keys = append(keys, en.Task.TaskID)
				}
				return keys, next, err
			},
			want: five("p"),
		},
		{
			name: "ListClaimed",
			setup: func(e *env) {
				for i, id := range five("c") {
					e.create(id, Epoch)
					e.claim(id, tieTimes[i].Add(time.Second))
				}
				e.create("unclaimed", Epoch)
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				entries, next, err := e.s.ListClaimed(e.ctx, testQueue, Epoch.Add(time.Minute), page)
				var keys []string
				for _, en := range entries {
					keys = append(keys, en.Task.TaskID)
					if en.RunID != 0 || en.WorkerGroup != workerGroup || en.WorkerID != workerID || !en.Claimed.Equal(en.Task.Runs[0].Started.Time) {
						return nil, "", fmt.Errorf("bad claimed entry %+v", en)
					}
				}
				return keys, next, err
			},
			want: five("c"),
		},
		{
			name: "ListTaskGroup",
			setup: func(e *env) {
				for _, id := range []string{"m3", "m0", "m4", "m1", "m2"} {
					e.create(id, Epoch, withGroup("g"))
				}
				e.create("n", Epoch, withGroup("h"))
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				tasks, next, err := e.s.ListTaskGroup(e.ctx, "g", page)
				return ids(tasks), next, err
			},
			want: five("m"),
		},
		{
			name: "ListDependents",
			setup: func(e *env) {
				e.create("d", Epoch)
				for _, id := range []string{"x4", "x2", "x0", "x1", "x3"} {
					e.create(id, Epoch, withDeps("d"))
				}
				e.create("y", Epoch)
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				tasks, next, err := e.s.ListDependents(e.ctx, "d", page)
				return ids(tasks), next, err
			},
			want: five("x"),
		},
	}
}

// recordListings are the listings of other records: task queues, workers,
// a run's artifacts, clients.
func recordListings() []listing {
	return []listing{
		{
			name: "ListTaskQueues",
			setup: func(e *env) {
				for _, id := range five("prov/q") {
					_, err := e.s.TouchTaskQueue(e.ctx, store.TouchTaskQueueParams{TaskQueueID: id, Now: Epoch, Expires: Epoch.Add(time.Hour)})
					require.NoError(e.t, err)
				}
				_, err := e.s.TouchTaskQueue(e.ctx, store.TouchTaskQueueParams{TaskQueueID: "prov/expired", Now: Epoch, Expires: Epoch})
				require.NoError(e.t, err)
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				qs, next, err := e.s.ListTaskQueues(e.ctx, Epoch, store.TaskQueueFilter{}, page)
				var keys []string
				for _, q := range qs {
					keys = append(keys, q.TaskQueueID)
				}
				return keys, next, err
			},
			want: five("prov/q"),
		},
		{
			name: "ListWorkers",
			setup: func(e *env) {
				for _, k := range [][2]string{{"b", "2"}, {"a", "1"}, {"c", "1"}, {"a", "2"}, {"b", "1"}} {
					_, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: k[0], WorkerID: k[1]}, Now: Epoch, Expires: Epoch.Add(time.Hour)})
					require.NoError(e.t, err)
				}
				_, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: store.WorkerKey{TaskQueueID: "prov/other", WorkerGroup: "a", WorkerID: "0"}, Now: Epoch, Expires: Epoch.Add(time.Hour)})
				require.NoError(e.t, err)
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				ws, next, err := e.s.ListWorkers(e.ctx, Epoch, store.WorkerFilter{TaskQueueID: testQueue}, page)
				var keys []string
				for _, w := range ws {
					keys = append(keys, w.WorkerGroup+"/"+w.WorkerID)
				}
				return keys, next, err
			},
			want: []string{"a/1", "a/2", "b/1", "b/2", "c/1"},
		},
		{
			name: "ListArtifacts",
			setup: func(e *env) {
				e.bring("t", queue.StateRunning)
				for _, name := range []string{"public/n3", "public/n1", "public/n4", "public/n0", "public/n2"} {
					e.artifact("t", 0, name, Epoch.Add(time.Hour))
				}
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				as, next, err := e.s.ListArtifacts(e.ctx, "t", 0, page)
				var keys []string
				for _, a := range as {
					keys = append(keys, a.Name)
				}
				return keys, next, err
			},
			want: five("public/n"),
		},
		{
			name: "ListClients",
			setup: func(e *env) {
				for _, id := range []string{"p/3", "p/1", "other", "p/4", "p/0", "p/2"} {
					_, err := e.s.CreateClient(e.ctx, newClient(id), nil)
					require.NoError(e.t, err)
				}
			},
			list: func(e *env, page store.Page) ([]string, string, error) {
				cs, next, err := e.s.ListClients(e.ctx, "p/", page)
				var keys []string
				for _, c := range cs {
					keys = append(keys, c.ClientID)
				}
				return keys, next, err
			},
			want: five("p/"),
		},
	}
}

// checkPages walks a listing of want: whole, in one exact page, and in
// pages of two (2, 2, 1, tokens until the last); a token it did not give
// is refused.
func checkPages(t *testing.T, e *env, list lister, want []string) {
	// Default page: everything, no token.
	all, next, err := list(e, store.Page{})
	require.NoError(t, err)
	require.Equal(t, want, all)
	require.Empty(t, next)

	// A page exactly as long as the list has no token either.
	all, next, err = list(e, store.Page{Limit: len(want)})
	require.NoError(t, err)
	require.Equal(t, want, all)
	require.Empty(t, next)

	// Pages of two: 2, 2, 1, tokens until the last.
	var got []string
	var sizes []int
	token := ""
	for {
		keys, next, err := list(e, store.Page{Limit: 2, ContinuationToken: token})
		require.NoError(t, err)
		got = append(got, keys...)
		sizes = append(sizes, len(keys))
		if next == "" {
			break
		}
		require.Less(t, len(sizes), 10, "pagination does not end")
		token = next
	}
	require.Equal(t, want, got)
	require.Equal(t, []int{2, 2, 1}, sizes)

	_, _, err = list(e, store.Page{Limit: 2, ContinuationToken: "!!not-a-token!!"})
	require.ErrorIs(t, err, store.ErrBadContinuationToken)
}
