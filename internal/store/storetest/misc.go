package storetest

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// testExpireData: one sweep at +30h expires every kind of row whose time
// has come (tasks with their groups, dependents' edges and artifacts, task
// queues, workers, clients) and nothing else; a later sweep takes the
// worker whose quarantine kept it.
func testExpireData(t *testing.T, open Opener) {
	e := setup(t, open)
	storeExpiring(t, e)
	now := Epoch.Add(30 * time.Hour)
	res, err := expireAll(e.ctx, e.s, now)
	require.NoError(t, err)
	var blobs []string
	for _, b := range res.Blobs {
		blobs = append(blobs, b.TaskID+"/"+b.Name)
		require.Equal(t, "reference", b.StorageType)
		require.Equal(t, `{"url":"https://example.com/`+b.Name+`"}`, string(b.Details))
		require.Equal(t, 0, b.RunID)
	}
	sort.Strings(blobs)
	require.Equal(t, []string{"new/b1", "old/a1", "old/a2", "old/a3"}, blobs)
	res.Blobs = nil
	require.Equal(t, expired{Tasks: 2, TaskGroups: 2, Artifacts: 4, TaskQueues: 1, Workers: 1, Clients: 1}, *res)
	checkUnexpired(t, e)

	// Nothing more at the same time; once the quarantine is over the
	// worker goes too.
	res, err = expireAll(e.ctx, e.s, now)
	require.NoError(t, err)
	require.Equal(t, expired{}, *res)
	res, err = expireAll(e.ctx, e.s, Epoch.Add(73*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, res.Workers, "w-new and, its quarantine over, w-quarantined")
	require.Equal(t, 1, res.Tasks)
	require.Len(t, res.Blobs, 1)
	_, err = e.s.GetWorker(e.ctx, expiryWorker("w-quarantined"), Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// expiryWorker is the key of testExpireData's worker id.
func expiryWorker(id string) store.WorkerKey {
	return store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: id}
}

// storeExpiring stores testExpireData's rows: of each kind, some that
// expire by +30h and some that do not.
func storeExpiring(t *testing.T, e *env) {
	// "old" and its dependent "dep-old" expire at +2h; "new" lives 48h.
	e.bring("old", queue.StateRunning, withExpires(Epoch.Add(2*time.Hour)))
	e.bring("new", queue.StateRunning)
	e.create("dep-old", Epoch, withDeps("new"), withExpires(Epoch.Add(2*time.Hour)))
	e.artifact("old", 0, "a1", Epoch.Add(90*time.Minute))
	e.artifact("old", 0, "a2", Epoch.Add(2*time.Hour))
	// An artifact outliving its task (the API forbids it) still goes with
	// the task, and its data with it.
	e.artifact("old", 0, "a3", Epoch.Add(40*time.Hour))
	e.artifact("new", 0, "b1", Epoch.Add(20*time.Hour))
	e.artifact("new", 0, "b2", Epoch.Add(40*time.Hour))

	for _, q := range []struct {
		id      string
		expires time.Duration
	}{{"prov/oldq", time.Hour}, {"prov/newq", 5 * 24 * time.Hour}} {
		_, err := e.s.TouchTaskQueue(e.ctx, store.TouchTaskQueueParams{TaskQueueID: q.id, Now: Epoch, Expires: Epoch.Add(q.expires)})
		require.NoError(t, err)
	}
	for _, w := range []struct {
		id      string
		expires time.Duration
	}{{"w-old", time.Hour}, {"w-quarantined", time.Hour}, {"w-new", 48 * time.Hour}} {
		_, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: expiryWorker(w.id), Now: Epoch, Expires: Epoch.Add(w.expires)})
		require.NoError(t, err)
	}
	// Quarantine extends expiry to +24h only; the quarantine lasts to +72h.
	_, err := e.s.QuarantineWorker(e.ctx, store.QuarantineWorkerParams{Key: expiryWorker("w-quarantined"), Now: Epoch, QuarantineUntil: Epoch.Add(72 * time.Hour)})
	require.NoError(t, err)
	for _, c := range []struct {
		id       string
		expires  time.Duration
		deleteIt bool
	}{{"c-del", time.Hour, true}, {"c-keep", time.Hour, false}, {"c-future", 40 * time.Hour, true}} {
		cl := newClient(c.id)
		cl.Expires, cl.DeleteOnExpiration = Epoch.Add(c.expires), c.deleteIt
		_, err := e.s.CreateClient(e.ctx, cl, nil)
		require.NoError(t, err)
	}
}

// checkUnexpired checks what the sweep at +30h left: exactly the rows
// storeExpiring made to outlive it.
func checkUnexpired(t *testing.T, e *env) {
	for _, id := range []string{"old", "dep-old"} {
		_, err := e.s.GetTask(e.ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = e.s.GetTaskGroup(e.ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	e.get("new")
	_, err := e.s.GetTaskGroup(e.ctx, "new")
	require.NoError(t, err)
	deps, _, err := e.s.ListDependents(e.ctx, "new", store.Page{})
	require.NoError(t, err)
	require.Empty(t, deps, "edges go with their dependent")
	for _, a := range []struct {
		task, name string
		kept       bool
	}{{"old", "a1", false}, {"old", "a2", false}, {"old", "a3", false}, {"new", "b1", false}, {"new", "b2", true}} {
		_, err := e.s.GetArtifact(e.ctx, a.task, 0, a.name)
		if a.kept {
			require.NoError(t, err, a.name)
		} else {
			require.ErrorIs(t, err, store.ErrNotFound, a.name)
		}
	}
	qs, _, err := e.s.ListTaskQueues(e.ctx, Epoch, store.TaskQueueFilter{}, store.Page{})
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, "prov/newq", qs[0].TaskQueueID)
	ws, _, err := e.s.ListWorkers(e.ctx, Epoch, store.WorkerFilter{TaskQueueID: testQueue}, store.Page{})
	require.NoError(t, err)
	require.Len(t, ws, 2)
	require.Equal(t, []string{"w-new", "w-quarantined"}, []string{ws[0].WorkerID, ws[1].WorkerID})
	cs, _, err := e.s.ListClients(e.ctx, "", store.Page{})
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Equal(t, []string{"c-future", "c-keep"}, []string{cs[0].ClientID, cs[1].ClientID})
}

// signalWait bounds how long a wake-up may take to arrive; quietWait is how
// long a channel must stay silent to count as not signalled; drainWait is
// how long drain waits for late echoes, generously, so that an echo of an
// earlier notification is not mistaken for a new one on a loaded machine.
const (
	signalWait = 5 * time.Second
	quietWait  = 200 * time.Millisecond
	drainWait  = 500 * time.Millisecond
)

func requireSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(signalWait):
		t.Fatalf("no pending signal after %s", what)
	}
}

func requireNoSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("unexpected pending signal after %s", what)
	case <-time.After(quietWait):
	}
}

// drain consumes signals until the channel has been quiet for drainWait
// (drivers may echo their own notifications back asynchronously).
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		case <-time.After(drainWait):
			return
		}
	}
}

func testSubscribePending(t *testing.T, open Opener) {
	e := setup(t, open)
	ch, unsubscribe := hubOf(e.s).SubscribePending(testQueue, 1)
	other, unsubscribeOther := hubOf(e.s).SubscribePending("prov/other", 1)
	defer unsubscribeOther()

	e.create("t1", Epoch)
	requireSignal(t, ch, "createTask")
	drain(ch)

	// Asking for more than there is: nothing can be left, so no waiter is
	// woken to look (a claim that takes all it asked for wakes the next).
	e.claimWork(testQueue, 2, Epoch)
	requireNoSignal(t, ch, "claimWork")

	e.mustApply("t1", Epoch, report(queue.ReasonWorkerShutdown, 0, Epoch))
	requireSignal(t, ch, "a retry")
	drain(ch)

	e.bring("d", queue.StateRunning)
	drain(ch)
	e.create("x", Epoch, withDeps("d"))
	requireNoSignal(t, ch, "creating an unscheduled task")
	e.mustApply("d", Epoch, report(queue.StateCompleted, 0, Epoch))
	requireSignal(t, ch, "a dependency resolving")
	drain(ch)

	e.mustApply("x", Epoch, cancel(Epoch))
	e.mustApply("x", Epoch, rerun(Epoch))
	requireSignal(t, ch, "rerunTask")
	drain(ch)

	select {
	case <-other:
		t.Fatal("another queue's subscriber was woken")
	default:
	}
	e.create("o", Epoch, withQueue("prov/other"))
	requireSignal(t, other, "createTask in the other queue")

	unsubscribe()
	unsubscribe() // safe twice
	e.create("t2", Epoch)
	requireNoSignal(t, ch, "unsubscribing")
}

// expired counts what every service's expiry removed.
type expired struct {
	Tasks, TaskGroups, Artifacts, TaskQueues, Workers, Clients int
	IndexedTasks, IndexNamespaces, Secrets, HookFires          int
	GithubRecords, Notifications                               int
	Blobs                                                      []store.ExpiredArtifact
}

// expireAll runs the expiry of every service whose rows testExpireData
// looks at, so its checks see that each deletes only its own.
func expireAll(ctx context.Context, s store.Store, now time.Time) (*expired, error) {
	q, err := s.ExpireQueueData(ctx, now)
	if err != nil {
		return nil, err
	}
	out := &expired{Tasks: q.Tasks, TaskGroups: q.TaskGroups, Artifacts: q.Artifacts, TaskQueues: q.TaskQueues, Workers: q.Workers, Blobs: q.Blobs}
	for _, x := range []struct {
		count *int
		run   func(context.Context, time.Time) (int, error)
	}{
		{&out.Clients, s.ExpireClients},
		{&out.Secrets, s.ExpireSecrets},
		{&out.HookFires, s.ExpireHookFires},
		{&out.GithubRecords, s.ExpireGithubRecords},
		{&out.Notifications, s.ExpireNotifications},
	} {
		if *x.count, err = x.run(ctx, now); err != nil {
			return nil, err
		}
	}
	if out.IndexedTasks, out.IndexNamespaces, err = s.ExpireIndex(ctx, now); err != nil {
		return nil, err
	}
	return out, nil
}

// testTextNUL: no store keeps a NUL in a text column (PostgreSQL's text
// cannot: it failed the statement, answered 500): a write or a look-up
// with one fails with store.ErrTextNUL on every driver, before anything
// is written; a task definition keeps its NULs (as JSON) and the columns
// taken from it have U+FFFD instead (the history still finds the task by
// the rest of its name).
func testTextNUL(t *testing.T, open Opener) {
	e := setup(t, open)
	ctx := e.ctx
	require.ErrorIs(t, e.s.AddDenylistAddress(ctx, notify.ChannelEmail, "a\x00@x.org"), store.ErrTextNUL)
	_, err := e.s.IsDenylisted(ctx, notify.ChannelEmail, "a\x00@x.org")
	require.ErrorIs(t, err, store.ErrTextNUL)
	_, _, err = e.s.EnqueueNotification(ctx, mail("a\x00@x.org", "s"), Epoch)
	require.ErrorIs(t, err, store.ErrTextNUL)
	states, err := e.s.NotificationStates(ctx)
	require.NoError(t, err)
	require.Empty(t, states, "nothing was written")
	_, err = e.s.GetClient(ctx, "c\x00")
	require.ErrorIs(t, err, store.ErrTextNUL)

	e.create("nul", Epoch, func(def *queue.Task) {
		def.Metadata.Name = "build\x00 one"
		def.Routes = []string{"notify.email.a\x00b@x.org.on-defined"}
	})
	task, err := e.s.GetTask(ctx, "nul")
	require.NoError(t, err)
	require.Equal(t, "build\x00 one", task.Task.Metadata.Name)
	require.Equal(t, []string{"notify.email.a\x00b@x.org.on-defined"}, task.Task.Routes)
	found, _, err := e.s.ListTasks(ctx, store.TaskFilter{Name: " one"}, store.Page{})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "build\x00 one", found[0].Task.Metadata.Name)
	require.Equal(t, []notificationRef{{queue.EventTaskDefined, notify.ChannelEmail, "a\uFFFDb@x.org", notify.StateRefused, -1}}, e.notifications("nul"), "the route's notification is recorded, refused, with U+FFFD for the NUL")

	// What went wrong elsewhere (a mail server's or a forge's answer) is
	// recorded with U+FFFD for a NUL or bytes that are not UTF-8: recording
	// a failure cannot itself fail.
	const remote, recorded = "550 no\x00such \xffuser", "550 no\uFFFDsuch \uFFFDuser"
	_, _, err = e.s.EnqueueNotification(ctx, mail("b@x.org", "s"), Epoch)
	require.NoError(t, err)
	claimed, err := e.s.ClaimNotifications(ctx, claimParams("s", Epoch, 10))
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	ok, err := e.s.FinishNotification(ctx, &claimed[0], notify.Outcome{State: notify.StateFailed, Error: remote}, Epoch)
	require.NoError(t, err)
	require.True(t, ok)
	n, err := e.s.GetNotification(ctx, claimed[0].ID)
	require.NoError(t, err)
	require.Equal(t, recorded, n.Error)
	_, err = e.s.AddGithubDelivery(ctx, newDelivery("nul", Epoch))
	require.NoError(t, err)
	lease := Epoch.Add(time.Minute)
	d, err := e.s.ClaimGithubDelivery(ctx, Epoch, lease)
	require.NoError(t, err)
	require.NoError(t, e.s.RetryGithubDelivery(ctx, store.RetryGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID, Lease: lease, Next: Epoch, Error: remote}))
	d, err = e.s.ClaimGithubDelivery(ctx, Epoch, lease)
	require.NoError(t, err)
	require.NoError(t, e.s.FinishGithubDelivery(ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID, Lease: lease, Now: Epoch,
		State: store.DeliveryFailed, Outcome: remote, Error: remote}))
	d, err = e.s.GetGithubDelivery(ctx, d.Host, d.DeliveryID)
	require.NoError(t, err)
	require.Equal(t, recorded, d.Error)
	// A hook's failed fire quotes its template, which keeps NULs.
	require.NoError(t, e.s.AddLastFire(ctx, &store.LastFire{HookGroupID: "g", HookID: "h", FiredBy: "triggerHook", TaskID: "t",
		TaskCreateTime: Epoch, Result: "error", Error: remote}))
	fires, _, err := e.s.ListLastFires(ctx, "g", "h", store.Page{})
	require.NoError(t, err)
	require.Len(t, fires, 1)
	require.Equal(t, recorded, fires[0].Error)
}
