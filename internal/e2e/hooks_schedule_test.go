package e2e_test

import (
	"context"
	"encoding/json"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestHookScheduleFiresOncePerDueTime runs two `hopper serve` replicas on
// one PostgreSQL database with a hook due every two seconds, kills one of
// them (SIGKILL) mid-run and later starts it again: every due time that
// fired created exactly one task and one fire record, and the schedule
// went on through the kill and the restart.
func TestHookScheduleFiresOncePerDueTime(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	args := []string{"--db", db}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	ca, cb := rootClient(a), rootClient(b)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const group, id, tq = "e2e-sched", "every/2s", "e2e-sched/hooks"
	_, err := ca.CreateRole(ctx, "hook-id:"+group+"/*", &tcclient.RoleRequest{Description: "scheduled e2e hooks",
		Scopes: []string{"queue:create-task:lowest:" + tq, "queue:create-task:project:none", "queue:scheduler-id:-"}})
	require.NoError(t, err)
	_, err = ca.CreateHook(ctx, group, id, &tcclient.Hook{
		Metadata: json.RawMessage(`{"name":"every 2s","description":"e2e","owner":"e2e@example.com"}`),
		Schedule: []string{"*/2 * * * * *"},
		Task: json.RawMessage(`{"taskQueueId":"` + tq + `","created":{"$fromNow":"0 seconds"},"deadline":{"$fromNow":"1 hour"},
			"payload":{},"metadata":{"name":"due ${now}","description":"${firedBy}","owner":"e2e@example.com","source":"https://example.com"}}`),
	})
	require.NoError(t, err)

	// dueAfter counts the fires due after at+1 s (a task's created is its
	// due time), reading each fire's task once.
	dues := map[string]time.Time{}
	dueAfter := func(at time.Time) int {
		fires, err := cb.AllLastFires(ctx, group, id)
		require.NoError(t, err)
		n := 0
		for _, f := range fires {
			if _, ok := dues[f.TaskID]; !ok {
				task, err := cb.Task(ctx, f.TaskID)
				require.NoError(t, err)
				dues[f.TaskID] = task.Created.Time
			}
			if dues[f.TaskID].After(at.Add(time.Second)) {
				n++
			}
		}
		return n
	}
	const patience = 2 * time.Minute
	start := time.Now()
	testclock.WaitFor(t, patience, "three fires before the kill", func() bool { return dueAfter(start) >= 3 })
	require.NoError(t, a.Signal(syscall.SIGKILL))
	<-a.Done()
	killed := time.Now()
	testclock.WaitFor(t, patience, "three fires by the surviving replica", func() bool { return dueAfter(killed) >= 3 })
	restarted := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env, DataDir: a.DataDir})
	restartedAt := time.Now()
	testclock.WaitFor(t, patience, "three fires after the restart", func() bool { return dueAfter(restartedAt) >= 3 })
	status, err := rootClient(restarted).GetHookStatus(ctx, group, id)
	require.NoError(t, err)
	require.NotEmpty(t, status.NextScheduledDate)
	// Stop the schedule, and let a fire in flight end (its task and its
	// record both there) before counting.
	_, err = cb.UpdateHook(ctx, group, id, &tcclient.Hook{
		Metadata: json.RawMessage(`{"name":"stopped","description":"e2e","owner":"e2e@example.com"}`),
		Task:     json.RawMessage(`{}`),
	})
	require.NoError(t, err)
	testclock.WaitFor(t, patience, "as many fire records as tasks", func() bool {
		fires, err := cb.AllLastFires(ctx, group, id)
		require.NoError(t, err)
		counts, err := cb.TaskQueueCounts(ctx, tq)
		require.NoError(t, err)
		return len(fires) == counts.PendingTasks
	})
	fires, err := cb.AllLastFires(ctx, group, id)
	require.NoError(t, err)
	counts, err := cb.TaskQueueCounts(ctx, tq)
	require.NoError(t, err)
	require.Equal(t, len(fires), counts.PendingTasks, "every task has its fire record and no more")

	// One fire record per due time, each its own task created at its due
	// time; due times are two seconds apart, even where a replica died
	// holding one: a replica was up throughout, and the survivor fires the
	// due times the dead one's lease held back.
	require.GreaterOrEqual(t, len(fires), 6, "fires: %+v", fires)
	dueTimes := map[time.Time]string{}
	taskIDs := map[string]bool{}
	var afterKill int
	for _, f := range fires {
		require.Equal(t, "schedule", f.FiredBy)
		require.Equal(t, "success", f.Result, "fire %+v", f)
		require.False(t, taskIDs[f.TaskID], "task %s recorded twice", f.TaskID)
		taskIDs[f.TaskID] = true
		task, err := cb.Task(ctx, f.TaskID)
		require.NoError(t, err)
		due := task.Created.Time
		require.Zero(t, due.Nanosecond(), "created is the due time")
		require.Zero(t, due.Second()%2, "created is a due time: %s", due)
		prev, dup := dueTimes[due]
		require.False(t, dup, "due time %s fired twice (tasks %s and %s)", due, prev, f.TaskID)
		dueTimes[due] = f.TaskID
		if due.After(killed.Add(time.Second)) {
			afterKill++
		}
	}
	require.GreaterOrEqual(t, afterKill, 3, "the surviving replica kept firing")
	var times []time.Time
	for due := range dueTimes {
		times = append(times, due)
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	gaps := 0
	for i := 1; i < len(times); i++ {
		if times[i].Sub(times[i-1]) != 2*time.Second {
			gaps++
		}
	}
	require.Zero(t, gaps, "due times were skipped: %v", times)
	t.Logf("%d fires from %s to %s, %d gaps, killed at %s", len(fires), times[0].Format(time.TimeOnly),
		times[len(times)-1].Format(time.TimeOnly), gaps, killed.Format(time.TimeOnly))
}
