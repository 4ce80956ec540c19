package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Upgrader gives a fresh database migrated up to and including version:
// exec runs a statement of literal SQL on it, and open opens the store on
// it, which applies the remaining migrations.
type Upgrader func(t *testing.T, version int) (exec func(query string), open func() store.Store)

// RunUpgrade checks that the tasks of a database written before a
// migration that moved them are still found after it: claimed, resolved,
// listed in their group, expired.
func RunUpgrade(t *testing.T, before Upgrader) {
	t.Run("TaskGroupMembers", func(t *testing.T) {
		t.Parallel()
		testUpgradeTaskGroupMembers(t, before)
	})
	t.Run("History", func(t *testing.T) {
		t.Parallel()
		testUpgradeHistory(t, before)
	})
}

// testUpgradeHistory writes a failed task as migration 012 left the tables,
// then upgrades (migration 013 copies each task's creation time, queue and
// name from its definition into the columns the history's indexes use), and
// finds it by each.
func testUpgradeHistory(t *testing.T, before Upgrader) {
	exec, open := before(t, 12)
	created := Epoch.Add(1234 * time.Millisecond)
	task := queue.NewTaskState("failedTaskAAAAAAAAAAAA", *NewTask("prov/old", created, withGroup("groupAAAAAAAAAAAAAAAAA"),
		func(d *queue.Task) { d.Metadata.Name = "Nightly O'Build" }))
	var tr queue.Transition
	task.DependenciesSatisfied(created, &tr)
	require.NoError(t, task.Claim(0, workerGroup, workerID, created, created.Add(claimTimeout), &tr))
	require.NoError(t, task.ReportFailed(0, created, &tr))
	exec(legacyTaskInsert(t, task, "NULL", "NULL", "NULL", "NULL"))
	exec(`UPDATE tasks SET unresolved = 0`)
	exec(`INSERT INTO task_group_members (task_group_id, task_id, expires) VALUES ('groupAAAAAAAAAAAAAAAAA', 'failedTaskAAAAAAAAAAAA', ` +
		fmt.Sprint(task.Task.Expires.Millis()) + `)`)

	s := open()
	for _, f := range []store.TaskFilter{
		{State: queue.StateFailed},
		{State: queue.StateFailed, Name: "o'build"},
		{TaskQueueID: "prov/old", CreatedFrom: created, CreatedTo: created.Add(time.Millisecond)},
		{TaskGroupID: "groupAAAAAAAAAAAAAAAAA", Name: "nightly"},
	} {
		got, _, err := s.ListTasks(context.Background(), f, store.Page{})
		require.NoError(t, err)
		require.Len(t, got, 1, "found by %+v after the upgrade", f)
		require.Equal(t, task.TaskID, got[0].TaskID)
	}
}

// testUpgradeTaskGroupMembers writes a pending and a running task as
// migration 007 left the tasks table, then upgrades (migration 008 records
// each task in task_group_members and drops the group and expiry indexes
// of tasks).
func testUpgradeTaskGroupMembers(t *testing.T, before Upgrader) {
	exec, open := before(t, 7)
	now := Epoch
	pending := queue.NewTaskState("pendingTaskAAAAAAAAAAA", *NewTask(testQueue, now, withGroup("groupAAAAAAAAAAAAAAAAA")))
	var tr queue.Transition
	pending.DependenciesSatisfied(now, &tr)
	running := queue.NewTaskState("runningTaskAAAAAAAAAAA", *NewTask(testQueue, now, withGroup("groupAAAAAAAAAAAAAAAAA")))
	running.DependenciesSatisfied(now, &tr)
	require.NoError(t, running.Claim(0, workerGroup, "old-worker", now, now.Add(claimTimeout), &tr))
	exec(`INSERT INTO task_groups (task_group_id, scheduler_id, expires) VALUES ('groupAAAAAAAAAAAAAAAAA', '-', ` +
		fmt.Sprint(now.Add(72*time.Hour).UnixMilli()) + `)`)
	exec(legacyTaskInsert(t, pending, "1", "NULL", "NULL", fmt.Sprint(now.UnixMilli())))
	exec(legacyTaskInsert(t, running, "NULL", fmt.Sprint(now.Add(claimTimeout).UnixMilli()), fmt.Sprint(now.UnixMilli()), "NULL"))

	s := open()
	ctx := context.Background()
	listed, _, err := s.ListTaskGroup(ctx, "groupAAAAAAAAAAAAAAAAA", store.Page{})
	require.NoError(t, err)
	require.Len(t, listed, 2, "the group lists the tasks written before the upgrade")

	res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
		Count: 5, Now: now, TakenUntil: now.Add(claimTimeout)})
	require.NoError(t, err)
	require.Len(t, res.Claims, 1, "the pending task is claimable after the upgrade")
	require.Equal(t, pending.TaskID, res.Claims[0].Task.TaskID)

	for _, id := range []string{pending.TaskID, running.TaskID} {
		_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.ReportCompleted(0, now, tr)
		}})
		require.NoError(t, err, "resolving %s", id)
	}

	expired, err := s.ExpireQueueData(ctx, now.Add(49*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, expired.Tasks, "tasks written before the upgrade expire")
	listed, _, err = s.ListTaskGroup(ctx, "groupAAAAAAAAAAAAAAAAA", store.Page{})
	require.NoError(t, err)
	require.Empty(t, listed)
}

// legacyTaskInsert is the row of a task as migrations 001 to 007 stored it,
// in literal SQL.
func legacyTaskInsert(t *testing.T, task *queue.TaskState, pendingSeq, takenUntil, claimedAt, pendingSince string) string {
	t.Helper()
	def, err := json.Marshal(task.Task)
	require.NoError(t, err)
	runs, err := json.Marshal(task.Runs)
	require.NoError(t, err)
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	d := task.Task
	values := []string{quote(task.TaskID), quote(d.TaskQueueID), quote(d.SchedulerID), quote(d.ProjectID), quote(d.TaskGroupID),
		quote(d.Requires), fmt.Sprint(queue.PriorityWeight(d.Priority)), fmt.Sprint(d.Deadline.Millis()), fmt.Sprint(d.Expires.Millis()),
		quote(string(def)), fmt.Sprint(task.RetriesLeft), quote(string(runs)), quote(task.State()), "1",
		takenUntil, claimedAt, pendingSeq, pendingSince}
	return `INSERT INTO tasks (task_id, task_queue_id, scheduler_id, project_id, task_group_id, requires, priority, deadline, expires,
		definition, retries_left, runs, state, unresolved, taken_until, claimed_at, pending_seq, pending_since)
		VALUES (` + strings.Join(values, ", ") + `)`
}
