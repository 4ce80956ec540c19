package maintenance_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

const testQueue = "prov-maint/wt-maint"

type bundle struct {
	store store.Store
	clock *testclock.Clock
	pub   *storetest.ChangeRecorder
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/hopper.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return &bundle{store: db, clock: testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), pub: &storetest.ChangeRecorder{}}
}

// createClaimed creates a task and claims its run 0 until now + claimFor.
func (b *bundle) createClaimed(t testing.TB, taskID string, claimFor time.Duration) {
	t.Helper()
	storetest.CreateClaimed(t, b.store, testQueue, taskID, b.clock.Now(), claimFor)
}

func TestClaimExpirerRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.createClaimed(t, "aaaaaaaaQaaaaaaaaaaaaA", time.Minute)
	e := &maintenance.ClaimExpirer{Store: b.store, Publisher: b.pub, Clock: b.clock}

	b.clock.Advance(time.Minute - time.Millisecond)
	n, err := e.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a claim expired before its takenUntil")

	b.clock.Advance(time.Millisecond)
	n, err = e.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"aaaaaaaaQaaaaaaaaaaaaA task-exception", "aaaaaaaaQaaaaaaaaaaaaA task-pending"}, b.pub.Events())
	n, err = e.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a second pass found more to do")
}

// TestClaimExpirerDrainsBatches: more due claims than one store call takes
// are all expired in one pass.
func TestClaimExpirerDrainsBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const tasks = 130 // more than one batch of 100
	for range tasks {
		b.createClaimed(t, tcclient.NewTaskID(), time.Minute)
	}
	b.clock.Advance(time.Minute)
	n, err := (&maintenance.ClaimExpirer{Store: b.store, Publisher: b.pub, Clock: b.clock}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, tasks, n)
}

func TestDeadlineResolverRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.createClaimed(t, "bbbbbbbbQbbbbbbbbbbbbA", 4*time.Hour)
	const delay = time.Minute
	r := &maintenance.DeadlineResolver{Store: b.store, Publisher: b.pub, Clock: b.clock, Delay: delay}

	b.clock.Advance(time.Hour + delay - time.Millisecond) // storetest.NewTask's deadline is an hour away
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "resolved before deadline + delay")

	b.clock.Advance(time.Millisecond)
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"bbbbbbbbQbbbbbbbbbbbbA task-exception"}, b.pub.Events())
	st, err := b.store.GetTask(ctx, "bbbbbbbbQbbbbbbbbbbbbA")
	require.NoError(t, err)
	require.Equal(t, queue.ReasonDeadlineExceeded, st.Runs[0].ReasonResolved)
}

// TestServicesRunInTheBackground starts each duty on a short interval and
// waits for it to act on its own.
func TestServicesRunInTheBackground(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const claimed, expired = "ccccccccQccccccccccccA", "ddddddddQddddddddddddA"
	b.createClaimed(t, claimed, time.Minute)
	_, err := b.store.CreateTask(ctx, store.CreateTaskParams{TaskID: expired, Now: b.clock.Now(),
		Task: storetest.NewTask("prov-maint/other", b.clock.Now(), func(t *queue.Task) {
			t.Expires = queue.NewTime(b.clock.Now().Add(2 * time.Hour))
		})})
	require.NoError(t, err)
	runs := func(want ...string) func() bool {
		return func() bool {
			st, err := b.store.GetTask(ctx, claimed)
			if err != nil || len(st.Runs) != len(want) {
				return false
			}
			for i, r := range st.Runs {
				if r.ReasonResolved != want[i] {
					return false
				}
			}
			return true
		}
	}

	b.clock.Advance(30 * time.Minute) // past the claim
	m := maintenance.NewMaintainer(
		&maintenance.ClaimExpirer{Store: b.store, Publisher: b.pub, Clock: b.clock, Interval: 10 * time.Millisecond},
		&maintenance.DeadlineResolver{Store: b.store, Publisher: b.pub, Clock: b.clock, Interval: 10 * time.Millisecond},
		// Its interval is never reached: the pass at Start does the work.
		&maintenance.DataExpirer{Expiries: []maintenance.Expiry{maintenance.QueueExpiry(b.store, nil, nil)}, Clock: b.clock, Interval: time.Hour},
	)
	m.Start(ctx)
	t.Cleanup(m.Stop)
	require.Eventually(t, runs(queue.ReasonClaimExpired, ""), 10*time.Second, 5*time.Millisecond, "the claim expires")
	b.clock.Advance(time.Hour) // past the deadlines
	require.Eventually(t, runs(queue.ReasonClaimExpired, queue.ReasonDeadlineExceeded), 10*time.Second, 5*time.Millisecond, "the deadline passes")
	// The changes are published after their commit.
	want := []string{claimed + " task-exception", claimed + " task-pending", claimed + " task-exception"}
	require.Eventually(t, func() bool { return slices.Equal(want, b.pub.Events(claimed)) }, 10*time.Second, 5*time.Millisecond)

	b.clock.Advance(time.Hour) // past the second task's expiry
	n := maintenance.NewMaintainer(&maintenance.DataExpirer{Expiries: []maintenance.Expiry{maintenance.QueueExpiry(b.store, nil, nil)},
		Clock: b.clock, Interval: time.Hour})
	n.Start(ctx)
	t.Cleanup(n.Stop)
	require.Eventually(t, func() bool {
		_, err := b.store.GetTask(ctx, expired)
		return errors.Is(err, store.ErrNotFound)
	}, 10*time.Second, 5*time.Millisecond, "data expiration runs at Start")
	_, err = b.store.GetTask(ctx, claimed)
	require.NoError(t, err, "a task that has not expired is kept")
	n.Stop()
	m.Stop()
	m.Stop() // safe twice
}

// TestStopIsSafe: Stop may be called before Start and twice after it.
func TestStopIsSafe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	services := map[string]func() maintenance.Service{
		"claim expirer":     func() maintenance.Service { return &maintenance.ClaimExpirer{Store: b.store, Clock: b.clock} },
		"deadline resolver": func() maintenance.Service { return &maintenance.DeadlineResolver{Store: b.store, Clock: b.clock} },
		"data expirer": func() maintenance.Service {
			return &maintenance.DataExpirer{Expiries: []maintenance.Expiry{maintenance.QueueExpiry(b.store, nil, nil)}, Clock: b.clock}
		},
		"every": func() maintenance.Service {
			return &maintenance.Every{What: "sweeping", Interval: time.Hour, Pass: (&sweeper{}).pass}
		},
		"purge requests": func() maintenance.Service {
			return &maintenance.DataExpirer{Expiries: []maintenance.Expiry{{Service: "purge-cache", Run: b.store.ExpirePurgeRequests}}, Clock: b.clock}
		},
	}
	for name, build := range services {
		t.Run(name, func(t *testing.T) {
			build().Stop()
			s := build()
			s.Start(context.Background())
			s.Stop()
			s.Stop()
		})
	}
}

// countingPass counts a duty's passes, and holds the third until
// release closes, handing its context to third.
type countingPass struct {
	calls   atomic.Int64
	third   chan context.Context
	release chan struct{}
}

func (f *countingPass) pass(ctx context.Context) error {
	if f.calls.Add(1) == 3 && f.third != nil {
		f.third <- ctx
		<-f.release
	}
	return nil
}

// TestEveryPolls: a duty runs at Start and then every interval; Stop ends
// the loop's context and waits for the pass under way, so for the loop
// itself: none can start once Stop has returned (and TestMain fails the
// package if a loop outlives the tests).
func TestEveryPolls(t *testing.T) {
	t.Parallel()
	f := &countingPass{third: make(chan context.Context, 1), release: make(chan struct{})}
	s := &maintenance.Every{What: "counting", Pass: f.pass, Interval: 5 * time.Millisecond}
	s.Start(context.Background())
	var pass context.Context
	select {
	case pass = <-f.third:
	case <-time.After(time.Minute):
		t.Fatalf("%d passes, not three", f.calls.Load())
	}
	stopped := make(chan struct{})
	go func() {
		s.Stop()
		close(stopped)
	}()
	<-pass.Done() // Stop has begun: the pass's context ended
	select {
	case <-stopped:
		t.Fatal("Stop returned while a pass was under way")
	default:
	}
	close(f.release)
	<-stopped
}

// heldPasses numbers a duty's passes as they start and holds each until
// its release closes (or the duty stops).
type heldPasses struct {
	n        atomic.Int64
	started  chan int64
	releases [8]chan struct{}
}

func newHeldPasses() *heldPasses {
	h := &heldPasses{started: make(chan int64, 8)}
	for i := range h.releases {
		h.releases[i] = make(chan struct{})
	}
	return h
}

func (h *heldPasses) pass(ctx context.Context) error {
	i := h.n.Add(1)
	h.started <- i
	if i < int64(len(h.releases)) {
		select {
		case <-h.releases[i]:
		case <-ctx.Done():
		}
	}
	return nil
}

// next waits for the next pass to start and returns its number.
func (h *heldPasses) next(t *testing.T) int64 {
	t.Helper()
	select {
	case i := <-h.started:
		return i
	case <-time.After(10 * time.Second):
		t.Fatal("no pass started")
		return 0
	}
}

// TestEveryWakeAndKick: Wake runs a pass once the one under way ends;
// Kick runs one at once, beside it (the github service's deliveries
// and reports are kicked so that new work is not held behind a slow
// pass); Stop ends and waits for both.
func TestEveryWakeAndKick(t *testing.T) {
	t.Parallel()
	h := newHeldPasses()
	e := &maintenance.Every{What: "holding", Interval: time.Hour, Pass: h.pass}
	e.Start(context.Background())
	t.Cleanup(e.Stop)
	require.EqualValues(t, 1, h.next(t), "the pass at Start")

	e.Wake()
	e.Wake() // one with the first
	select {
	case i := <-h.started:
		t.Fatalf("pass %d started beside the one under way on Wake", i)
	case <-time.After(100 * time.Millisecond):
	}
	e.Kick()
	require.EqualValues(t, 2, h.next(t), "a kicked pass starts while the first is held")
	close(h.releases[1])
	require.EqualValues(t, 3, h.next(t), "the woken pass follows the first")
	select {
	case i := <-h.started:
		t.Fatalf("pass %d: two wake-ups made two passes", i)
	case <-time.After(100 * time.Millisecond):
	}
	e.Stop() // passes 2 and 3 are still held: Stop ends them
	e.Stop()
}

// sweeper is a duty's pass that counts its sweeps.
type sweeper struct{ calls chan struct{} }

func (s *sweeper) pass(context.Context) error {
	select { // never blocks the loop, so Stop always returns
	case s.calls <- struct{}{}:
	default:
	}
	return nil
}

// purgeSpy counts the purge-request expiries asked of the store.
type purgeSpy struct {
	store.PurgeCacheStore
	at chan time.Time
}

func (p *purgeSpy) ExpirePurgeRequests(ctx context.Context, now time.Time) (int, error) {
	select { // never blocks the loop, so Stop always returns
	case p.at <- now:
	default:
	}
	return p.PurgeCacheStore.ExpirePurgeRequests(ctx, now)
}

// TestSideExpirersSweepAtStart: a service's own expiry (the Object
// service's, scheduled by Every) and a listed Expiry (Purge-Cache's, run
// by the DataExpirer) run at Start and then on their interval.
func TestSideExpirersSweepAtStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	objects := &sweeper{calls: make(chan struct{}, 8)}
	purges := &purgeSpy{PurgeCacheStore: b.store, at: make(chan time.Time, 8)}
	m := maintenance.NewMaintainer(
		&maintenance.Every{What: "expiring objects", Pass: objects.pass, Interval: 10 * time.Millisecond},
		&maintenance.DataExpirer{Expiries: []maintenance.Expiry{{Service: "purge-cache", Run: purges.ExpirePurgeRequests}},
			Clock: b.clock, Interval: 10 * time.Millisecond},
	)
	m.Start(context.Background())
	defer m.Stop()
	for range 2 { // the sweep at Start, then one on the tick
		select {
		case <-objects.calls:
		case <-time.After(10 * time.Second):
			t.Fatal("the object expirer did not sweep")
		}
		select {
		case at := <-purges.at:
			require.Equal(t, b.clock.Now(), at, "purge requests expire at the clock's time")
		case <-time.After(10 * time.Second):
			t.Fatal("the purge-request expirer did not sweep")
		}
	}
}

// TestDataExpirerAuditRetention: the audit log keeps an entry for
// DefaultAuditRetention, then the data expirer deletes it.
func TestDataExpirerAuditRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	_, err := b.store.CreateClient(ctx, &store.Client{ClientID: "audited", Created: now, LastModified: now, LastDateUsed: now,
		LastRotated: now, Expires: now.Add(365 * 24 * time.Hour)}, &store.Audit{ClientID: "root", Action: "created", At: now})
	require.NoError(t, err)
	entries := func() int {
		got, _, err := b.store.ListAuditHistory(ctx, store.AuditQuery{ByClient: "root"}, store.Page{})
		require.NoError(t, err)
		return len(got)
	}
	d := &maintenance.DataExpirer{Expiries: []maintenance.Expiry{maintenance.AuditExpiry(b.store, 0)}, Clock: b.clock}
	b.clock.Advance(maintenance.DefaultAuditRetention - time.Minute)
	require.NoError(t, d.RunOnce(ctx))
	require.Equal(t, 1, entries(), "kept within the retention")
	b.clock.Advance(2 * time.Minute)
	require.NoError(t, d.RunOnce(ctx))
	require.Equal(t, 0, entries(), "deleted after it")
}

// TestDataExpirerRunsEveryExpiry: each service's expiry runs at the
// clock's time, and one that fails keeps neither the others from running
// nor its error from being reported.
func TestDataExpirerRunsEveryExpiry(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	var ran []string
	expiry := func(name string, err error) maintenance.Expiry {
		return maintenance.Expiry{Service: name, Run: func(_ context.Context, now time.Time) (int, error) {
			require.Equal(t, clock.Now(), now)
			ran = append(ran, name)
			return 1, err
		}}
	}
	boom := errors.New("boom")
	d := &maintenance.DataExpirer{Clock: clock, Expiries: []maintenance.Expiry{expiry("a", nil), expiry("b", boom), expiry("c", nil)}}
	err := d.RunOnce(context.Background())
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "the b service's data")
	require.Equal(t, []string{"a", "b", "c"}, ran)
}
