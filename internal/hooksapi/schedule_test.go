package hooksapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/store"
)

// TestScheduledFiresOncePerDueTime moves a fake clock across a hook's due
// times: nothing fires early, each due time fires once (however often
// the scheduler polls, and with two replicas polling together), and the
// task is created at its due time.
func TestScheduledFiresOncePerDueTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.hookRole(t, "g")
	b.createHook(t, "g", "minutely", []string{"0 * * * * *", "0 */2 * * * *"}, taskTemplate(`,"created":{"$fromNow":"0 seconds"}`))
	due := b.nextDue(t, "g", "minutely")

	b.clock.Set(due.Add(-2 * time.Second))
	require.Zero(t, b.fireDue(t, b.firer), "not due yet")

	other := b.newFirer()
	var created []string
	for i := range 3 {
		b.clock.Set(due.Add(200 * time.Millisecond))
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		for _, f := range []interface {
			FireDue(context.Context) (int, error)
		}{b.firer, other, b.firer, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := f.FireDue(ctx)
				require.NoError(t, err)
				mu.Lock()
				total += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.Equal(t, 1, total, "due time %d fired once", i)
		fires := b.fires(t, "g", "minutely")
		require.Len(t, fires, i+1)
		require.Equal(t, "schedule", fires[0].FiredBy)
		require.Equal(t, "success", fires[0].Result)
		task, err := b.root.Task(ctx, fires[0].TaskID)
		require.NoError(t, err)
		require.True(t, task.Created.Time.Equal(due), "created at the due time %s, got %s", due, task.Created.Time)
		require.Equal(t, "schedule", task.Metadata.Name)
		created = append(created, fires[0].TaskID)
		next := b.nextDue(t, "g", "minutely")
		require.Equal(t, due.Add(time.Minute), next, "overlapping patterns count once")
		due = next
	}
	require.Len(t, created, 3)
	require.NotEqual(t, created[0], created[1])
}

// TestMissedDueTimesFireOnce: due times that pass while nothing polls
// fire once, for the earliest, and the schedule resumes after now.
func TestMissedDueTimesFireOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hookRole(t, "g")
	b.createHook(t, "g", "h", []string{"0 * * * * *"}, taskTemplate(`,"created":{"$fromNow":"0 seconds"}`))
	due := b.nextDue(t, "g", "h")
	b.clock.Set(due.Add(5*time.Minute + 10*time.Second))
	require.Equal(t, 1, b.fireDue(t, b.firer))
	require.Zero(t, b.fireDue(t, b.firer))
	fires := b.fires(t, "g", "h")
	require.Len(t, fires, 1)
	task, err := b.root.Task(context.Background(), fires[0].TaskID)
	require.NoError(t, err)
	require.True(t, task.Created.Time.Equal(due), "the fire is for the first missed due time")
	require.Equal(t, due.Add(6*time.Minute), b.nextDue(t, "g", "h"))
}

// TestScheduledFireFailuresAreRecorded: a template that fails, a role
// without the scopes, and a template declining all move the schedule on;
// the failures are recorded and create nothing.
func TestScheduledFireFailuresAreRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.hookRole(t, "g")
	b.createHook(t, "g", "broken", []string{"0 * * * * *"}, json.RawMessage(`{"$eval":"nope"}`))
	b.createHook(t, "other", "no-role", []string{"0 * * * * *"}, taskTemplate(""))
	b.createHook(t, "g", "declines", []string{"0 * * * * *"}, json.RawMessage(`{"$if":"false","then":{}}`))
	due := b.nextDue(t, "g", "broken")
	b.clock.Set(due.Add(time.Second))
	require.Equal(t, 3, b.fireDue(t, b.firer))

	broken := b.fires(t, "g", "broken")
	require.Len(t, broken, 1)
	require.Equal(t, "error", broken[0].Result)
	require.Contains(t, broken[0].Error, "nope")
	_, err := b.root.Task(ctx, broken[0].TaskID)
	require.Error(t, err)
	st, err := b.root.GetHookStatus(ctx, "g", "broken")
	require.NoError(t, err)
	require.Equal(t, "error", st.LastFire["result"])

	noRole := b.fires(t, "other", "no-role")
	require.Len(t, noRole, 1)
	var rec struct {
		Code string `json:"code"`
	}
	require.NoError(t, json.Unmarshal([]byte(noRole[0].Error), &rec))
	require.Equal(t, "InsufficientScopes", rec.Code)

	require.Empty(t, b.fires(t, "g", "declines"))
	for _, id := range []string{"broken", "declines"} {
		require.Equal(t, due.Add(time.Minute), b.nextDue(t, "g", id), "%s moved on", id)
	}
	counts, err := b.root.TaskQueueCounts(ctx, testQueue)
	require.NoError(t, err)
	require.Zero(t, counts.PendingTasks)
}

// TestLeaseOfADeadReplicaRunsOut: a replica that claimed a due time and
// died holds it only until its lease ends; then another fires it, once.
func TestLeaseOfADeadReplicaRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.hookRole(t, "g")
	b.createHook(t, "g", "h", []string{"0 * * * * *"}, taskTemplate(""))
	due := b.nextDue(t, "g", "h")
	now := due.Add(time.Second)
	b.clock.Set(now)
	claimed, err := b.store.ClaimDueHook(ctx, now, now.Add(10*time.Second)) // the replica that dies
	require.NoError(t, err)
	require.NotNil(t, claimed)
	require.Zero(t, b.fireDue(t, b.firer), "the lease holds")
	b.clock.Set(now.Add(11 * time.Second))
	require.Equal(t, 1, b.fireDue(t, b.firer))
	fires := b.fires(t, "g", "h")
	require.Len(t, fires, 1)
	require.Equal(t, claimed.NextTaskID, fires[0].TaskID, "the due time's own taskId")
}

// crashAfterCreate is a store through which a replica "dies" right after
// creating a scheduled fire's task, before recording the fire.
type crashAfterCreate struct {
	store.Store
}

func (crashAfterCreate) FinishScheduledFire(context.Context, store.FinishFireParams) (bool, error) {
	return false, errors.New("replica killed")
}

// TestFireRepeatedAfterACrashCreatesOneTask: a replica that created a due
// time's task and died before recording it leaves the hook leased; when
// the lease runs out another replica fires the due time again, the queue
// takes the same createTask as the same task, and the fire is recorded
// once, as a success.
func TestFireRepeatedAfterACrashCreatesOneTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.hookRole(t, "g")
	b.createHook(t, "g", "h", []string{"0 * * * * *"}, taskTemplate(`,"created":{"$fromNow":"0 seconds"},"extra":{"at":{"$eval":"now"}}`))
	due := b.nextDue(t, "g", "h")
	b.clock.Set(due.Add(time.Second))
	dying := b.newFirer()
	dying.Store = crashAfterCreate{b.store}
	_, err := dying.FireDue(ctx)
	require.ErrorContains(t, err, "replica killed")
	counts, err := b.root.TaskQueueCounts(ctx, testQueue)
	require.NoError(t, err)
	require.Equal(t, 1, counts.PendingTasks, "the dead replica created the task")
	require.Empty(t, b.fires(t, "g", "h"))

	b.clock.Set(due.Add(5 * time.Second))
	require.Zero(t, b.fireDue(t, b.firer), "its lease still holds")
	b.clock.Set(due.Add(15 * time.Second))
	require.Equal(t, 1, b.fireDue(t, b.firer))
	fires := b.fires(t, "g", "h")
	require.Len(t, fires, 1)
	require.Equal(t, "success", fires[0].Result, fires[0].Error)
	counts, err = b.root.TaskQueueCounts(ctx, testQueue)
	require.NoError(t, err)
	require.Equal(t, 1, counts.PendingTasks, "the repeat is the same task")
	require.Equal(t, due.Add(time.Minute), b.nextDue(t, "g", "h"))
}

// TestTakeoverFiresEveryDueTimeOnce: replicas die firing two hooks (each
// creates its due time's task and dies before recording it), leaving the
// hooks leased. When the leases run out, four replicas fire due hooks at
// once: the due times the dead leases covered all fire, each as one task
// with one record, and the hooks then wait for their next due times on the
// schedule. If instead no replica took the hooks over for minutes (an
// outage), each fires once, for the due time it was claimed for, and waits
// for the first due time after the takeover.
func TestTakeoverFiresEveryDueTimeOnce(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers() {
		for _, tc := range []struct {
			name     string
			takeover time.Duration // after the dead replicas' claims
			outage   bool
		}{
			{name: "takeover", takeover: 10*time.Second + 500*time.Millisecond},
			{name: "outage", takeover: 5 * time.Minute, outage: true},
		} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				testTakeover(t, setupOn(t, driver), tc.takeover, tc.outage)
			})
		}
	}
}

func testTakeover(t *testing.T, b *bundle, takeover time.Duration, outage bool) {
	ctx := context.Background()
	b.hookRole(t, "g")
	schedules := map[string]string{"every-2s": "*/2 * * * * *", "every-3s": "*/3 * * * * *"}
	var claimedAt time.Time
	firstDue := map[string]time.Time{}
	for id, pattern := range schedules {
		b.createHook(t, "g", id, []string{pattern}, taskTemplate(`,"created":{"$fromNow":"0 seconds"}`))
		firstDue[id] = b.nextDue(t, "g", id)
		if at := firstDue[id].Add(200 * time.Millisecond); at.After(claimedAt) {
			claimedAt = at
		}
	}
	b.clock.Set(claimedAt)
	for range schedules {
		dying := b.newFirer()
		dying.Store = crashAfterCreate{b.store}
		_, err := dying.FireDue(ctx)
		require.ErrorContains(t, err, "replica killed")
	}
	require.Zero(t, b.fireDue(t, b.firer), "the dead replicas' leases hold")

	now := b.clock.Advance(takeover)
	firers := []*hooksapi.Firer{b.firer, b.newFirer(), b.newReplica(), b.newReplica()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fired int
	)
	for _, f := range firers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := f.FireDue(ctx)
				if !assert.NoError(t, err) || n == 0 {
					return
				}
				mu.Lock()
				fired += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	records := 0
	for id, pattern := range schedules {
		sched, err := hooks.ParseSchedule([]string{pattern})
		require.NoError(t, err)
		// The due times to fire: every one from the first until the
		// takeover, or after an outage only the first.
		var want []time.Time
		for due := firstDue[id]; !due.After(now); due, _ = sched.Next(due) {
			want = append(want, due)
			if outage {
				break
			}
		}
		fires := b.fires(t, "g", id)
		var got []time.Time
		for i := len(fires) - 1; i >= 0; i-- {
			require.Equal(t, "success", fires[i].Result, fires[i].Error)
			task, err := b.root.Task(ctx, fires[i].TaskID)
			require.NoError(t, err)
			got = append(got, task.Created.Time.UTC())
		}
		require.Equal(t, want, got, "%s: the due times fired, in order, each once", id)
		records += len(fires)
		next, _ := sched.Next(now)
		require.Equal(t, next, b.nextDue(t, "g", id), "%s waits for the next due time", id)
	}
	require.Equal(t, records, fired, "each due time fired once")
	counts, err := b.root.TaskQueueCounts(ctx, testQueue)
	require.NoError(t, err)
	require.Equal(t, records, counts.PendingTasks, "one task per due time (the dead replicas' tasks among them)")
}
