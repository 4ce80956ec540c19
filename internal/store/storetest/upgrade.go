package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
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
	t.Run("AnonymousRole", func(t *testing.T) {
		t.Parallel()
		testUpgradeAnonymousRole(t, before)
	})
	t.Run("NotifyDedupDenylist", func(t *testing.T) {
		t.Parallel()
		testUpgradeNotifyDedupDenylist(t, before)
	})
	t.Run("GithubOutbox", func(t *testing.T) {
		t.Parallel()
		testUpgradeGithubOutbox(t, before)
	})
	t.Run("GithubDeliveries", func(t *testing.T) {
		t.Parallel()
		testUpgradeGithubDeliveries(t, before)
	})
	t.Run("Hooks", func(t *testing.T) {
		t.Parallel()
		testUpgradeHooks(t, before)
	})
	t.Run("NotifyOutbox", func(t *testing.T) {
		t.Parallel()
		testUpgradeNotifyOutbox(t, before)
	})
}

// testUpgradeNotifyDedupDenylist: migration 020 keys the denylist by the
// address without ASCII case (two spellings of one address become one
// entry, listed as the first in byte order) and carries the request
// hashes of the outbox over, so a request stored just before the upgrade
// is still a duplicate after it.
func testUpgradeNotifyDedupDenylist(t *testing.T, before Upgrader) {
	exec, open := before(t, 19)
	exec(`INSERT INTO notify_denylist (notification_type, notification_address) VALUES
		('email', 'deny@x.org'), ('email', 'Deny@X.org'), ('slack-channel', 'C1'), ('slack-channel', 'c1')`)
	ctx := context.Background()
	now := time.Now()
	m := &notify.Message{Email: &notify.Email{Address: "a@x.org", Subject: "s", Content: "c"}}
	body, err := json.Marshal(m)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	exec(fmt.Sprintf(`INSERT INTO notify_outbox (id, channel, target, task_id, run_id, event, route, status, message, dedup,
		state, attempts, next_attempt, lease_owner, reserved_at, error, created, updated, expires)
		VALUES ('old', 'email', 'a@x.org', '', -1, '', '', NULL, '%s', '%s', 'pending', 0, 0, NULL, NULL, '', %d, %d, %d)`,
		body, hex.EncodeToString(sum[:]), now.UnixMilli(), now.UnixMilli(), now.Add(time.Hour).UnixMilli()))
	s := open()
	list, _, err := s.ListDenylist(ctx, store.Page{})
	require.NoError(t, err)
	require.Equal(t, []store.DenylistAddress{{NotificationType: "email", NotificationAddress: "Deny@X.org"},
		{NotificationType: "slack-channel", NotificationAddress: "C1"}, {NotificationType: "slack-channel", NotificationAddress: "c1"}}, list)
	denied, err := s.IsDenylisted(ctx, notify.ChannelEmail, "DENY@x.ORG")
	require.NoError(t, err)
	require.True(t, denied)
	_, dup, err := s.EnqueueNotification(ctx, m, now.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, dup, "the request stored before the upgrade is still a duplicate")
}

// Default scopes of the anonymous role as hopper 0.1.0 (1e64542) and the
// first hopper with roles (cfa48c4) created it, in their order.
var (
	anonymousScopes010 = []string{"auth:current-scopes", "auth:expand-scopes", "auth:get-client:*", "auth:get-role:*", "auth:list-clients", "auth:list-roles",
		"queue:get-artifact:public/*", "queue:get-provisioner:*", "queue:get-task:*", "queue:get-task-queue:*",
		"queue:get-worker:*", "queue:get-worker-type:*", "queue:list-artifacts:*", "queue:list-dependent-tasks:*",
		"queue:list-provisioners", "queue:list-task-group:*", "queue:list-task-queues", "queue:list-worker-types:*",
		"queue:list-workers:*", "queue:pending-count:*", "queue:claimed-count:*", "queue:status:*",
		"queue:pending-list:*", "queue:claimed-list:*",
		"index:find-task:*", "index:list-namespaces:*", "index:list-tasks:*",
		"purge-cache:purge-requests:*"}
	anonymousScopesFirst = anonymousScopes010[:22]
)

// testUpgradeAnonymousRole: migration 019 gives the task history's scope
// (hopper:list-tasks) to an anonymous role still as an earlier hopper
// created it, recorded in the audit log and with the roles version moved
// so that replicas read roles again; a role the operator changed (the Auth
// API stores scopes sorted), or another role with the same scopes, is left
// as it is.
func testUpgradeAnonymousRole(t *testing.T, before Upgrader) {
	// The migration stamps the change with the database's clock: the
	// role was created before it.
	created := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	role := func(id string, scopes []string) string {
		b, err := json.Marshal(scopes)
		require.NoError(t, err)
		return fmt.Sprintf(`INSERT INTO roles (role_id, scopes, description, created, last_modified) VALUES ('%s', '%s', 'd', %d, %d)`,
			id, b, created.UnixMilli(), created.UnixMilli())
	}
	sorted := slices.Clone(anonymousScopes010)
	slices.Sort(sorted)
	for _, tt := range []struct {
		name     string
		scopes   []string
		other    string // a role other than anonymous with the same scopes
		upgraded bool
	}{
		{name: "0.1.0", scopes: anonymousScopes010, other: "repo:x", upgraded: true},
		{name: "first", scopes: anonymousScopesFirst, upgraded: true},
		{name: "changed", scopes: sorted},
		{name: "none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exec, open := before(t, 18)
			if tt.scopes != nil {
				exec(role("anonymous", tt.scopes))
			}
			if tt.other != "" {
				exec(role(tt.other, tt.scopes))
			}
			s := open()
			ctx := context.Background()
			roles, err := s.ListRoles(ctx)
			require.NoError(t, err)
			history, _, err := s.ListAuditHistory(ctx, store.AuditQuery{EntityType: store.AuditRole, EntityID: "anonymous"}, store.Page{})
			require.NoError(t, err)
			version, err := s.RolesVersion(ctx)
			require.NoError(t, err)
			byID := map[string]store.Role{}
			for _, r := range roles {
				byID[r.RoleID] = r
			}
			if tt.other != "" {
				require.Equal(t, tt.scopes, byID[tt.other].Scopes, "another role with the same scopes is not the anonymous role")
			}
			if tt.scopes == nil {
				require.NotContains(t, byID, "anonymous", "a deployment without the role gets it from hopper's start, not the upgrade")
				require.Empty(t, history)
				return
			}
			got := byID["anonymous"]
			if !tt.upgraded {
				require.Equal(t, tt.scopes, got.Scopes, "a role the operator changed is left as it is")
				require.True(t, got.LastModified.Equal(created))
				require.Empty(t, history)
				require.EqualValues(t, 1, version)
				return
			}
			require.Contains(t, got.Scopes, "hopper:list-tasks")
			require.Subset(t, got.Scopes, anonymousScopes010, "today's defaults include every earlier default")
			require.True(t, got.Created.Equal(created), "created stays")
			require.True(t, got.LastModified.After(created), "last modified moves")
			require.Len(t, history, 1)
			require.Equal(t, "static/hopper/upgrade", history[0].ClientID)
			require.Equal(t, "updated", history[0].Action)
			require.EqualValues(t, 2, version, "the roles version moves, so replicas read the roles again")
		})
	}
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
