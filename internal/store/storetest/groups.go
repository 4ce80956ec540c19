package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func testTaskGroupCreate(t *testing.T, open Opener) {
	e := setup(t, open)
	for _, id := range []string{"c", "a", "b"} {
		e.create(id, Epoch, withGroup("g"))
	}
	e.create("z", Epoch, withGroup("other"))
	e.claim("b", Epoch)

	members, next, err := e.s.ListTaskGroup(e.ctx, "g", store.Page{})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, []string{"a", "b", "c"}, ids(members))
	require.Equal(t, e.get("b"), members[1])
	require.Equal(t, queue.StateRunning, members[1].State())

	members, _, err = e.s.ListTaskGroup(e.ctx, "unknown", store.Page{})
	require.NoError(t, err)
	require.Empty(t, members)
}

func testTaskGroupSchedulerConflict(t *testing.T, open Opener) {
	e := setup(t, open)
	e.create("a", Epoch, withGroup("g"), func(d *queue.Task) { d.SchedulerID = "s1" })
	before, err := e.s.GetTaskGroup(e.ctx, "g")
	require.NoError(t, err)

	_, err = e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: "b", Now: Epoch,
		Task: NewTask(testQueue, Epoch, withGroup("g"), withExpires(Epoch.Add(100*time.Hour)), func(d *queue.Task) { d.SchedulerID = "s2" })})
	requireQueueError(t, err, queue.KindConflict)

	_, err = e.s.GetTask(e.ctx, "b")
	require.ErrorIs(t, err, store.ErrNotFound)
	after, err := e.s.GetTaskGroup(e.ctx, "g")
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused task must not extend the group")
	require.Equal(t, "s1", after.SchedulerID)
}

func testTaskGroupSeal(t *testing.T, open Opener) {
	e := setup(t, open)
	e.create("a", Epoch, withGroup("g"))
	e.create("b", Epoch, withGroup("g"))

	t1, t2 := Epoch.Add(time.Minute), Epoch.Add(2*time.Minute)
	g, err := e.s.SealTaskGroup(e.ctx, "g", t1)
	require.NoError(t, err)
	require.Equal(t, store.TaskGroup{TaskGroupID: "g", SchedulerID: "-", Expires: Epoch.Add(49 * time.Hour), Sealed: &t1}, *g)
	// Sealing again keeps the original time.
	g, err = e.s.SealTaskGroup(e.ctx, "g", t2)
	require.NoError(t, err)
	require.Equal(t, t1, *g.Sealed)
	g, err = e.s.GetTaskGroup(e.ctx, "g")
	require.NoError(t, err)
	require.Equal(t, t1, *g.Sealed)

	// No new member.
	_, err = e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: "c", Now: t2, Task: NewTask(testQueue, t2, withGroup("g"))})
	requireQueueError(t, err, queue.KindConflict)
	_, err = e.s.GetTask(e.ctx, "c")
	require.ErrorIs(t, err, store.ErrNotFound)

	// A repeat of an existing member is still answered (hopper's documented
	// relaxation of TC); a different definition still conflicts.
	res, err := e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: "a", Now: t2, Task: NewTask(testQueue, Epoch, withGroup("g"))})
	require.NoError(t, err)
	require.Empty(t, res.Changes)
	require.Equal(t, e.get("a"), res.Task)
	_, err = e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: "a", Now: t2, Task: NewTask(testQueue, Epoch, withGroup("g"), withPriority("high"))})
	requireQueueError(t, err, queue.KindConflict)

	// Members keep working.
	e.claim("a", t2)
	res = e.mustApply("a", t2, report(queue.StateCompleted, 0, t2))
	require.Equal(t, queue.StateCompleted, res.Task.State())

	_, err = e.s.SealTaskGroup(e.ctx, "unknown", t2)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testCancelTaskGroup(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(20 * time.Minute)
	_, err := e.s.CancelTaskGroup(e.ctx, "unknown", now)
	require.ErrorIs(t, err, store.ErrNotFound)

	e.bring("u", queue.StateUnscheduled, withGroup("g"))
	e.bring("p", queue.StatePending, withGroup("g"))
	e.bring("r", queue.StateRunning, withGroup("g"))
	e.bring("c", queue.StateCompleted, withGroup("g"))
	e.bring("late", queue.StatePending, withGroup("g"), withDeadline(Epoch.Add(10*time.Minute)))
	e.bring("outsider", queue.StatePending)

	// Unsealed: refused, nothing touched.
	_, err = e.s.CancelTaskGroup(e.ctx, "g", now)
	requireQueueError(t, err, queue.KindConflict)
	require.Equal(t, queue.StatePending, e.get("p").State())

	_, err = e.s.SealTaskGroup(e.ctx, "g", now)
	require.NoError(t, err)
	res, err := e.s.CancelTaskGroup(e.ctx, "g", now)
	require.NoError(t, err)
	require.Equal(t, "g", res.Group.TaskGroupID)
	require.Equal(t, 5, res.GroupSize)
	require.Equal(t, []string{"p", "r", "u"}, res.Canceled)
	requireStatusFilled(t, res.Changes)
	requireEvents(t, res.Changes, ev("p", queue.EventTaskException, 0), ev("r", queue.EventTaskException, 0), ev("u", queue.EventTaskException, 0))
	require.Equal(t, workerGroup, res.Changes[1].Events[0].WorkerGroup, "a claimed run's cancellation names its worker")
	for _, c := range res.Changes {
		require.Nil(t, c.GroupResolved, "late is still unresolved")
		run := c.Task.LastRun()
		require.Equal(t, queue.StateException, run.State)
		require.Equal(t, queue.ReasonCanceled, run.ReasonResolved)
		require.Equal(t, c.Task, e.get(c.Task.TaskID))
	}
	require.Equal(t, queue.StateCompleted, e.get("c").State())
	require.Equal(t, queue.StatePending, e.get("late").State())
	require.Equal(t, queue.StatePending, e.get("outsider").State())

	// Again: nothing left to cancel, except what was rerun since.
	res, err = e.s.CancelTaskGroup(e.ctx, "g", now)
	require.NoError(t, err)
	require.Empty(t, res.Canceled)
	require.Equal(t, 5, res.GroupSize)
	e.mustApply("p", now, rerun(now))
	res, err = e.s.CancelTaskGroup(e.ctx, "g", now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, []string{"p"}, res.Canceled)
	requireEvents(t, res.Changes, ev("p", queue.EventTaskException, 1))

	// The deadline sweep resolves the last member: the group resolves.
	dl, err := e.s.ExpireDeadlines(e.ctx, now, now, 100)
	require.NoError(t, err)
	require.Equal(t, []string{"late"}, changedIDs(dl.Changes))
	require.NotNil(t, dl.Changes[0].GroupResolved)
	require.Equal(t, "g", dl.Changes[0].GroupResolved.TaskGroupID)
}

func testTaskGroupResolved(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	e.bring("a", queue.StateRunning, withGroup("g"))
	e.bring("b", queue.StateRunning, withGroup("g"))

	res := e.mustApply("a", now, report(queue.StateCompleted, 0, now))
	require.Nil(t, res.Changes[0].GroupResolved)
	res = e.mustApply("b", now, report(queue.StateFailed, 0, now))
	require.Equal(t, &store.TaskGroup{TaskGroupID: "g", SchedulerID: "-", Expires: Epoch.Add(49 * time.Hour)}, res.Changes[0].GroupResolved)

	// A retry does not resolve; a rerun reopens the group, which resolves
	// again with it.
	e.mustApply("b", now, rerun(now))
	e.claim("b", now)
	res = e.mustApply("b", now, report(queue.ReasonWorkerShutdown, 1, now))
	require.Nil(t, res.Changes[0].GroupResolved)
	e.claim("b", now)
	res = e.mustApply("b", now, report(queue.StateCompleted, 2, now))
	require.NotNil(t, res.Changes[0].GroupResolved)

	// Cancelling a whole group reports the resolution on the last change.
	e.bring("c", queue.StatePending, withGroup("h"))
	e.bring("d", queue.StateUnscheduled, withGroup("h"))
	sealed := now
	_, err := e.s.SealTaskGroup(e.ctx, "h", sealed)
	require.NoError(t, err)
	cg, err := e.s.CancelTaskGroup(e.ctx, "h", now)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d"}, changedIDs(cg.Changes))
	require.Nil(t, cg.Changes[0].GroupResolved)
	require.Equal(t, &store.TaskGroup{TaskGroupID: "h", SchedulerID: "-", Expires: Epoch.Add(49 * time.Hour), Sealed: &sealed}, cg.Changes[1].GroupResolved)
}
