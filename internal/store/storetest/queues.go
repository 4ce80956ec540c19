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
