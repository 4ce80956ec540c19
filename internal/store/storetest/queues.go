package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// orderFixture creates pending tasks whose claim order is known: by
// priority, then by the time the run became pending. "r" was created first
// but its retry became pending last; "x" has passed its deadline by the
// time they are claimed.
func orderFixture(e *env) (claimAt time.Time, want []string) {
	ms := func(n int) time.Time { return Epoch.Add(time.Duration(n) * time.Millisecond) }
	e.create("r", ms(0))
	e.create("a", ms(1))
	e.create("c", ms(2), withPriority("high"))
	e.create("x", ms(3), withPriority("highest"), withDeadline(Epoch.Add(10*time.Minute)))
	e.create("d", ms(4), withPriority("very-high"))
	e.create("b", ms(5))
	e.create("e", ms(6), withPriority("high"))
	e.create("l", ms(7), withPriority("low"))
	e.claim("r", ms(8))
	e.mustApply("r", ms(9), report(queue.ReasonWorkerShutdown, 0, ms(9)))
	return Epoch.Add(11 * time.Minute), []string{"d", "c", "e", "l", "a", "b", "r"}
}

func testClaimOrder(t *testing.T, open Opener) {
	t.Run("one at a time", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		now, want := orderFixture(e)
		var got []string
		for range want {
			res := e.claimWork(testQueue, 1, now)
			require.Len(t, res.Claims, 1)
			got = append(got, res.Claims[0].Task.TaskID)
		}
		require.Equal(t, want, got)
		// The task past its deadline is never handed out.
		require.Empty(t, e.claimWork(testQueue, 1, now).Claims)
		require.Equal(t, queue.StatePending, e.get("x").State())
		pending, claimed := e.counts(now)
		require.Zero(t, pending)
		require.Equal(t, len(want), claimed)
	})
	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		now, want := orderFixture(e)
		res := e.claimWork(testQueue, 32, now)
		require.Equal(t, want, changedIDs(res.Changes))
		for i, c := range res.Claims {
			require.Equal(t, want[i], c.Task.TaskID)
			require.Equal(t, len(c.Task.Runs)-1, c.RunID)
		}
		require.Equal(t, 1, res.Claims[len(res.Claims)-1].RunID, "r's retry")
	})
	t.Run("before the deadline", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		orderFixture(e)
		res := e.claimWork(testQueue, 1, Epoch.Add(time.Minute))
		require.Equal(t, []string{"x"}, changedIDs(res.Changes))
	})
}

// testListPending: the pending list is in the order runs were queued, not
// by priority, and skips tasks past their deadline.
func testListPending(t *testing.T, open Opener) {
	e := setup(t, open)
	now, _ := orderFixture(e)
	entries, next, err := e.s.ListPending(e.ctx, testQueue, now, store.Page{})
	require.NoError(t, err)
	require.Empty(t, next)
	var got []string
	for _, en := range entries {
		got = append(got, en.Task.TaskID)
		require.Equal(t, len(en.Task.Runs)-1, en.RunID)
		require.Equal(t, en.Task.LastRun().Scheduled.Time, en.Inserted)
		require.Equal(t, e.get(en.Task.TaskID), en.Task)
	}
	require.Equal(t, []string{"a", "c", "d", "b", "e", "l", "r"}, got)
	require.Equal(t, Epoch.Add(9*time.Millisecond), entries[6].Inserted)
	require.Equal(t, 1, entries[6].RunID)

	entries, _, err = e.s.ListPending(e.ctx, testQueue, Epoch, store.Page{})
	require.NoError(t, err)
	require.Len(t, entries, 8, "x is listed while its deadline is ahead")

	entries, _, err = e.s.ListPending(e.ctx, "prov/unknown", now, store.Page{})
	require.NoError(t, err)
	require.Empty(t, entries)
}

func testTaskQueueCounts(t *testing.T, open Opener) {
	e := setup(t, open)
	pending, claimed := e.counts(Epoch)
	require.Zero(t, pending)
	require.Zero(t, claimed)

	e.bring("p1", queue.StatePending)
	e.bring("p2", queue.StatePending, withDeadline(Epoch.Add(10*time.Minute)))
	e.bring("u", queue.StateUnscheduled)
	e.bring("r", queue.StateRunning) // takenUntil Epoch+20m
	e.bring("c", queue.StateCompleted)
	e.create("o", Epoch, withQueue("prov/other"))

	tests := []struct {
		queue            string
		at               time.Duration
		pending, claimed int
	}{
		{testQueue, time.Minute, 2, 1},
		{testQueue, 10 * time.Minute, 1, 1},                // p2's deadline passed
		{testQueue, claimTimeout, 1, 0},                    // r's claim ran out
		{"prov/other", time.Minute, 1, 0},                  // queues are separate
		{"prov/unknown", time.Minute, 0, 0},                // unknown is zero, not an error
		{testQueue, time.Hour, 0, 0},                       // every deadline passed
		{testQueue, claimTimeout - time.Millisecond, 1, 1}, // claimed until takenUntil
	}
	for _, tc := range tests {
		p, c, err := e.s.TaskQueueCounts(e.ctx, tc.queue, Epoch.Add(tc.at))
		require.NoError(t, err)
		require.Equal(t, tc.pending, p, "pending of %s at +%s", tc.queue, tc.at)
		require.Equal(t, tc.claimed, c, "claimed of %s at +%s", tc.queue, tc.at)
	}
}

// lister reads one page of some listing as comparable keys.
type lister func(e *env, page store.Page) ([]string, string, error)

func testPagination(t *testing.T, open Opener) {
	ms := func(n int) time.Time { return Epoch.Add(time.Duration(n) * time.Millisecond) }
	// Ties on the time cross page boundaries, so the taskId tie-break of
	// the (time, taskId) cursors is exercised.
	tieTimes := []time.Time{ms(0), ms(1), ms(1), ms(1), ms(2)}
	five := func(prefix string) []string {
		var out []string
		for i := range 5 {
			out = append(out, fmt.Sprintf("%s%d", prefix, i))
		}
		return out
	}
	tests := []struct {
		name  string
		setup func(e *env)
		list  lister
		want  []string
	}{
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
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			tc.setup(e)

			// Default page: everything, no token.
			all, next, err := tc.list(e, store.Page{})
			require.NoError(t, err)
			require.Equal(t, tc.want, all)
			require.Empty(t, next)

			// A page exactly as long as the list has no token either.
			all, next, err = tc.list(e, store.Page{Limit: len(tc.want)})
			require.NoError(t, err)
			require.Equal(t, tc.want, all)
			require.Empty(t, next)

			// Pages of two: 2, 2, 1, tokens until the last.
			var got []string
			var sizes []int
			token := ""
			for {
				keys, next, err := tc.list(e, store.Page{Limit: 2, ContinuationToken: token})
				require.NoError(t, err)
				got = append(got, keys...)
				sizes = append(sizes, len(keys))
				if next == "" {
					break
				}
				require.Less(t, len(sizes), 10, "pagination does not end")
				token = next
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, []int{2, 2, 1}, sizes)

			_, _, err = tc.list(e, store.Page{Limit: 2, ContinuationToken: "!!not-a-token!!"})
			require.ErrorIs(t, err, store.ErrBadContinuationToken)
		})
	}
}

// artifact stores a reference artifact for the task's run.
func (e *env) artifact(taskID string, runID int, name string, expires time.Time) *store.Artifact {
	e.t.Helper()
	a, err := e.s.CreateArtifact(e.ctx, store.CreateArtifactParams{TaskID: taskID, RunID: runID, Name: name, Now: Epoch,
		Check: func(t *queue.TaskState, existing *store.Artifact) (*store.Artifact, error) {
			return &store.Artifact{TaskID: taskID, RunID: runID, Name: name, StorageType: "reference", ContentType: "text/plain",
				Details: []byte(`{"url":"https://example.com/` + name + `"}`), Expires: expires, Present: true}, nil
		}})
	require.NoError(e.t, err)
	return a
}

func testTaskQueues(t *testing.T, open Opener) {
	e := setup(t, open)
	touch := func(p store.TouchTaskQueueParams) *store.TaskQueue {
		t.Helper()
		q, err := e.s.TouchTaskQueue(e.ctx, p)
		require.NoError(t, err)
		return q
	}
	str := func(s string) *string { return &s }

	q := touch(store.TouchTaskQueueParams{TaskQueueID: "p1/a", Now: Epoch, Expires: Epoch.Add(24 * time.Hour)})
	require.Equal(t, store.TaskQueue{TaskQueueID: "p1/a", Description: "", Stability: "experimental", Expires: Epoch.Add(24 * time.Hour), LastDateActive: Epoch}, *q)

	// A shorter expiry never shrinks the record; activity moves forward;
	// description and stability change only when given.
	t1 := Epoch.Add(time.Hour)
	q = touch(store.TouchTaskQueueParams{TaskQueueID: "p1/a", Now: t1, Expires: t1.Add(time.Hour), Description: str("builds"), Stability: str("stable")})
	require.Equal(t, store.TaskQueue{TaskQueueID: "p1/a", Description: "builds", Stability: "stable", Expires: Epoch.Add(24 * time.Hour), LastDateActive: t1}, *q)
	t2 := Epoch.Add(2 * time.Hour)
	q = touch(store.TouchTaskQueueParams{TaskQueueID: "p1/a", Now: t2, Expires: Epoch.Add(5 * 24 * time.Hour)})
	require.Equal(t, store.TaskQueue{TaskQueueID: "p1/a", Description: "builds", Stability: "stable", Expires: Epoch.Add(5 * 24 * time.Hour), LastDateActive: t2}, *q)
	got, err := e.s.GetTaskQueue(e.ctx, "p1/a", t2)
	require.NoError(t, err)
	require.Equal(t, q, got)

	touch(store.TouchTaskQueueParams{TaskQueueID: "p1/b", Now: Epoch, Expires: Epoch.Add(time.Hour)})
	touch(store.TouchTaskQueueParams{TaskQueueID: "p10/c", Now: Epoch, Expires: Epoch.Add(time.Hour)})
	touch(store.TouchTaskQueueParams{TaskQueueID: "p2/a", Now: Epoch, Expires: Epoch.Add(time.Hour)})

	// Expired queues are neither found nor listed.
	_, err = e.s.GetTaskQueue(e.ctx, "p1/b", Epoch.Add(time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.s.GetTaskQueue(e.ctx, "p9/none", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)

	list := func(now time.Time, provisioner string) []string {
		t.Helper()
		qs, _, err := e.s.ListTaskQueues(e.ctx, now, store.TaskQueueFilter{ProvisionerID: provisioner}, store.Page{})
		require.NoError(t, err)
		out := []string{}
		for _, q := range qs {
			out = append(out, q.TaskQueueID)
		}
		return out
	}
	require.Equal(t, []string{"p1/a", "p1/b", "p10/c", "p2/a"}, list(Epoch, ""))
	require.Equal(t, []string{"p1/a", "p1/b"}, list(Epoch, "p1"), "the provisioner filter must not match p10")
	require.Equal(t, []string{"p1/a"}, list(Epoch.Add(time.Hour), "p1"))
	require.Equal(t, []string{}, list(Epoch, "p3"))
}

func testWorkers(t *testing.T, open Opener) {
	e := setup(t, open)
	key := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "w"}

	_, err := e.s.QuarantineWorker(e.ctx, store.QuarantineWorkerParams{Key: key, Now: Epoch, QuarantineUntil: Epoch.Add(time.Hour)})
	require.ErrorIs(t, err, store.ErrNotFound, "a worker never seen cannot be quarantined")

	w, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: key, Now: Epoch, Expires: Epoch.Add(24 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, key, w.WorkerKey)
	require.Equal(t, Epoch, w.FirstClaim)
	require.Equal(t, Epoch, w.LastDateActive)
	require.Equal(t, Epoch.Add(24*time.Hour), w.Expires)
	require.True(t, w.QuarantineUntil.Before(Epoch), "never quarantined shows a past time")
	require.Empty(t, w.QuarantineDetails)
	require.Empty(t, w.RecentTasks)

	// Seen again: firstClaim stays, activity moves, expiry never shrinks.
	t1 := Epoch.Add(time.Hour)
	w, err = e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: key, Now: t1, Expires: t1.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, Epoch, w.FirstClaim)
	require.Equal(t, t1, w.LastDateActive)
	require.Equal(t, Epoch.Add(24*time.Hour), w.Expires)
	w, err = e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: key, Now: t1, Expires: Epoch.Add(48 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, Epoch.Add(48*time.Hour), w.Expires)
	got, err := e.s.GetWorker(e.ctx, key, t1)
	require.NoError(t, err)
	require.Equal(t, w, got)

	// Quarantine: sets the time, extends expiry to at least a day ahead,
	// appends to the audit list.
	other := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "v"}
	_, err = e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: other, Now: Epoch, Expires: Epoch.Add(time.Hour)})
	require.NoError(t, err)
	qUntil := Epoch.Add(72 * time.Hour)
	d1 := store.QuarantineDetail{ClientID: "admin", UpdatedAt: "2030-01-02T03:04:05.000Z", QuarantineUntil: "2030-01-05T03:04:05.000Z", QuarantineInfo: "flaky"}
	w, err = e.s.QuarantineWorker(e.ctx, store.QuarantineWorkerParams{Key: other, Now: Epoch, QuarantineUntil: qUntil, Detail: d1})
	require.NoError(t, err)
	require.Equal(t, qUntil, w.QuarantineUntil)
	require.Equal(t, Epoch.Add(24*time.Hour), w.Expires)
	require.Equal(t, []store.QuarantineDetail{d1}, w.QuarantineDetails)
	d2 := store.QuarantineDetail{ClientID: "admin", UpdatedAt: "x", QuarantineUntil: "y", QuarantineInfo: "[unspecified]"}
	w, err = e.s.QuarantineWorker(e.ctx, store.QuarantineWorkerParams{Key: other, Now: Epoch, QuarantineUntil: qUntil, Detail: d2})
	require.NoError(t, err)
	require.Equal(t, []store.QuarantineDetail{d1, d2}, w.QuarantineDetails)
	got, err = e.s.GetWorker(e.ctx, other, Epoch)
	require.NoError(t, err)
	require.Equal(t, w, got)

	listed := func(now time.Time, quarantined *bool) []string {
		t.Helper()
		ws, _, err := e.s.ListWorkers(e.ctx, now, store.WorkerFilter{TaskQueueID: testQueue, Quarantined: quarantined}, store.Page{})
		require.NoError(t, err)
		out := []string{}
		for _, w := range ws {
			out = append(out, w.WorkerID)
		}
		return out
	}
	yes, no := true, false
	require.Equal(t, []string{"v", "w"}, listed(Epoch, nil))
	require.Equal(t, []string{"v"}, listed(Epoch, &yes))
	require.Equal(t, []string{"w"}, listed(Epoch, &no))

	// Past its expiry a worker shows only while quarantined.
	late := Epoch.Add(50 * time.Hour)
	require.Equal(t, []string{"v"}, listed(late, nil))
	_, err = e.s.GetWorker(e.ctx, key, late)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.s.GetWorker(e.ctx, other, late)
	require.NoError(t, err)

	// A past quarantineUntil lifts the quarantine.
	w, err = e.s.QuarantineWorker(e.ctx, store.QuarantineWorkerParams{Key: other, Now: Epoch.Add(time.Hour), QuarantineUntil: Epoch, Detail: d2})
	require.NoError(t, err)
	require.Equal(t, Epoch.Add(25*time.Hour), w.Expires)
	require.Equal(t, []string{"v", "w"}, listed(Epoch.Add(time.Hour), &no), "v is no longer quarantined")
	require.Equal(t, []string{}, listed(Epoch.Add(time.Hour), &yes))

	_, err = e.s.GetWorker(e.ctx, store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "none"}, Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testRecentTasks(t *testing.T, open Opener) {
	e := setup(t, open)
	key := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: "w"}
	// Unknown workers keep no history, and that is not an error.
	require.NoError(t, e.s.AddRecentTasks(e.ctx, key, []store.RecentTask{{TaskID: "x", RunID: 0}}))
	_, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: key, Now: Epoch, Expires: Epoch.Add(time.Hour)})
	require.NoError(t, err)

	var all []store.RecentTask
	for batch := range 5 {
		var tasks []store.RecentTask
		for i := range 7 {
			tasks = append(tasks, store.RecentTask{TaskID: fmt.Sprintf("t%02d", batch*7+i), RunID: i % 3})
		}
		require.NoError(t, e.s.AddRecentTasks(e.ctx, key, tasks))
		all = append(all, tasks...)
		w, err := e.s.GetWorker(e.ctx, key, Epoch)
		require.NoError(t, err)
		require.Equal(t, all[max(0, len(all)-20):], w.RecentTasks)
	}
	require.NoError(t, e.s.AddRecentTasks(e.ctx, key, nil))
	w, err := e.s.GetWorker(e.ctx, key, Epoch)
	require.NoError(t, err)
	require.Len(t, w.RecentTasks, 20)
	require.Equal(t, "t34", w.RecentTasks[19].TaskID)
}
