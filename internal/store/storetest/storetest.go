// Package storetest is the conformance suite every store driver runs: the
// same behaviour, checked the same way, on SQLite and PostgreSQL.
//
// Every test opens its own empty store and drives it with explicit fake
// times: the store never reads a clock, so each timestamp it records is
// known in advance and compared exactly.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Opener returns a fresh, empty, migrated store for one test.
type Opener func(t *testing.T) store.Store

// Epoch is the fake "now" every test starts from.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Identities shared by the tests.
const (
	testQueue    = "prov/wt"
	workerGroup  = "wg"
	workerID     = "w1"
	claimTimeout = 20 * time.Minute
)

// NewTask returns a valid definition for the task queue, created at now,
// with its deadline an hour later and expiry two days later.
func NewTask(taskQueueID string, now time.Time, mutate ...func(*queue.Task)) *queue.Task {
	p, w := queue.SplitTaskQueueID(taskQueueID)
	t := &queue.Task{
		ProvisionerID: p, WorkerType: w, TaskQueueID: taskQueueID,
		SchedulerID: "-", ProjectID: "none", Requires: queue.RequiresAllCompleted,
		Dependencies: []string{}, Routes: []string{}, Scopes: []string{},
		Priority: "lowest", Retries: 5,
		Created:  queue.NewTime(now),
		Deadline: queue.NewTime(now.Add(time.Hour)),
		Expires:  queue.NewTime(now.Add(48 * time.Hour)),
		Payload:  json.RawMessage(`{}`), Extra: json.RawMessage(`{}`),
		Metadata: queue.Metadata{Name: "t", Description: "d", Owner: "o@example.com", Source: "https://example.com"},
		Tags:     map[string]string{},
	}
	for _, m := range mutate {
		m(t)
	}
	return t
}

// Definition tweaks for NewTask.

func withDeps(ids ...string) func(*queue.Task) {
	return func(t *queue.Task) { t.Dependencies = ids }
}

func withRequires(r string) func(*queue.Task) {
	return func(t *queue.Task) { t.Requires = r }
}

func withGroup(id string) func(*queue.Task) {
	return func(t *queue.Task) { t.TaskGroupID = id }
}

func withRetries(n int) func(*queue.Task) {
	return func(t *queue.Task) { t.Retries = n }
}

func withPriority(p string) func(*queue.Task) {
	return func(t *queue.Task) { t.Priority = p }
}

func withDeadline(d time.Time) func(*queue.Task) {
	return func(t *queue.Task) { t.Deadline = queue.NewTime(d) }
}

func withExpires(d time.Time) func(*queue.Task) {
	return func(t *queue.Task) { t.Expires = queue.NewTime(d) }
}

func withQueue(q string) func(*queue.Task) {
	return func(t *queue.Task) {
		t.TaskQueueID = q
		t.ProvisionerID, t.WorkerType = queue.SplitTaskQueueID(q)
	}
}

// Run runs the whole conformance suite against the driver.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"CreateClaimComplete", testCreateClaimComplete},
		{"CreateTask", testCreateTask},
		{"CreateTaskIdempotency", testCreateTaskIdempotency},
		{"GetTasks", testGetTasks},
		{"ScheduleTask", testScheduleTask},
		{"RerunTask", testRerunTask},
		{"RerunRunCap", testRerunRunCap},
		{"CancelTask", testCancelTask},
		{"ClaimWork", testClaimWork},
		{"ClaimHandover", testClaimHandover},
		{"ClaimAtCreate", testClaimAtCreate},
		{"ClaimTask", testClaimTask},
		{"ReclaimTask", testReclaimTask},
		{"Reports", testReports},
		{"ReportConflicts", testReportConflicts},
		{"ExpireClaims", testExpireClaims},
		{"ExpireClaimsLimit", testExpireClaimsLimit},
		{"ExpireDeadlines", testExpireDeadlines},
		{"DependencyResolution", testDependencyResolution},
		{"DependencyMultiple", testDependencyMultiple},
		{"DependencyAtCreate", testDependencyAtCreate},
		{"DependencySelf", testDependencySelf},
		{"DependencyScheduledEarly", testDependencyScheduledEarly},
		{"DependencyErrors", testDependencyErrors},
		{"TaskGroupCreate", testTaskGroupCreate},
		{"TaskGroupSchedulerConflict", testTaskGroupSchedulerConflict},
		{"TaskGroupSeal", testTaskGroupSeal},
		{"CancelTaskGroup", testCancelTaskGroup},
		{"TaskGroupResolved", testTaskGroupResolved},
		{"ClaimOrder", testClaimOrder},
		{"ClaimRules", testClaimRules},
		{"ListPending", testListPending},
		{"TaskQueueCounts", testTaskQueueCounts},
		{"Pagination", testPagination},
		{"ForgedContinuationTokens", testForgedContinuationTokens},
		{"TaskQueues", testTaskQueues},
		{"Workers", testWorkers},
		{"RecentTasks", testRecentTasks},
		{"TouchMany", testTouchMany},
		{"TouchManyRecentTasks", testTouchManyRecentTasks},
		{"Artifacts", testArtifacts},
		{"Clients", testClients},
		{"Roles", testRoles},
		{"AuditHistory", testAuditHistory},
		{"RecordAudit", testRecordAudit},
		{"SigningKeys", testSigningKeys},
		{"TaskIdentities", testTaskIdentities},
		{"ListTasks", testListTasks},
		{"WorkerCapacity", testWorkerCapacity},
		{"ListWorkersSeen", testListWorkersSeen},
		{"ListHeldRuns", testListHeldRuns},
		{"ExpireData", testExpireData},
		{"SubscribePending", testSubscribePending},
		{"Objects", testObjects},
		{"ObjectsConcurrentCreate", testObjectsConcurrentCreate},
		{"ExpireObjects", testExpireObjects},
		{"PurgeRequests", testPurgeRequests},
		{"WorkerStanding", testWorkerStanding},
		{"PendingWithRoute", testPendingWithRoute},
		{"IndexCompletedTasks", testIndexCompletedTasks},
		{"IndexConcurrentCompletions", testIndexConcurrentCompletions},
		{"IndexInsertListExpire", testIndexInsertListExpire},
		{"Secrets", testSecrets},
		{"Hooks", testHooks},
		{"LoginAttempts", testLoginAttempts},
		{"LoginSessions", testLoginSessions},
		{"LoginOAuth", testLoginOAuth},
		{"LoginIdentities", testLoginIdentities},
		{"HookSchedule", testHookSchedule},
		{"HookClaimRace", testHookClaimRace},
		{"HookLastFires", testHookLastFires},
		{"GithubDeliveries", testGithubDeliveries},
		{"GithubDeliveryClaimRace", testGithubDeliveryClaimRace},
		{"GithubReplays", testGithubReplays},
		{"GithubFailedDeliveries", testGithubFailedDeliveries},
		{"GithubDeliveryAttempts", testGithubDeliveryAttempts},
		{"GithubBuilds", testGithubBuilds},
		{"GithubOutbox", testGithubOutbox},
		{"GithubExpiry", testGithubExpiry},
		{"GithubChecks", testGithubChecks},
		{"GithubCheckRace", testGithubCheckRace},
		{"Outbox", testOutbox},
		{"OutboxClaimRace", testOutboxClaimRace},
		{"FlowLimit", testFlowLimit},
		{"FlowSupersede", testFlowSupersede},
		{"FlowCancelInProgress", testFlowCancelInProgress},
		{"FlowFailFast", testFlowFailFast},
		{"WorkerPools", testWorkerPools},
		{"PoolWorkers", testPoolWorkers},
		{"PoolErrors", testPoolErrors},
		{"LeaseRace", testLeaseRace},
		{"NotifyOutbox", testNotifyOutbox},
		{"NotifyClaims", testNotifyClaims},
		{"RequestUnderLease", testRequestUnderLease},
		{"TextNUL", testTextNUL},
		{"Endpoints", testEndpoints},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// env bundles a store under test with the context the calls use.
type env struct {
	t   *testing.T
	ctx context.Context
	s   store.Store
}

func setup(t *testing.T, open Opener) *env {
	t.Helper()
	return &env{t: t, ctx: context.Background(), s: open(t)}
}

// create creates a task of testQueue at now, in its own task group unless
// mutate names another, and requires success.
func (e *env) create(taskID string, now time.Time, mutate ...func(*queue.Task)) *store.Result {
	e.t.Helper()
	def := NewTask(testQueue, now, mutate...)
	if def.TaskGroupID == "" {
		def.TaskGroupID = taskID // as queue.BuildTask defaults it
	}
	res, err := e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: taskID, Task: def, Now: now})
	require.NoError(e.t, err, "creating %s", taskID)
	requireStatusFilled(e.t, res.Changes)
	return res
}

// apply runs one transition through UpdateTask.
func (e *env) apply(taskID string, now time.Time, fn func(*queue.TaskState, *queue.Transition) error) (*store.Result, error) {
	e.t.Helper()
	res, err := e.s.UpdateTask(e.ctx, store.UpdateTaskParams{TaskID: taskID, Now: now, Apply: fn})
	if err == nil {
		requireStatusFilled(e.t, res.Changes)
	}
	return res, err
}

// mustApply is apply that requires success.
func (e *env) mustApply(taskID string, now time.Time, fn func(*queue.TaskState, *queue.Transition) error) *store.Result {
	e.t.Helper()
	res, err := e.apply(taskID, now, fn)
	require.NoError(e.t, err, "updating %s", taskID)
	return res
}

// claim claims the task's last run for the standard worker through
// UpdateTask, as claimTask does.
func (e *env) claim(taskID string, now time.Time) *store.Result {
	e.t.Helper()
	return e.mustApply(taskID, now, func(ts *queue.TaskState, tr *queue.Transition) error {
		return ts.Claim(len(ts.Runs)-1, workerGroup, workerID, now, now.Add(claimTimeout), tr)
	})
}

// claimWork calls ClaimWork for the standard worker.
func (e *env) claimWork(taskQueueID string, count int, now time.Time) *store.ClaimResult {
	e.t.Helper()
	res, err := e.s.ClaimWork(e.ctx, store.ClaimWorkParams{
		TaskQueueID: taskQueueID, WorkerGroup: workerGroup, WorkerID: workerID,
		Count: count, Now: now, TakenUntil: now.Add(claimTimeout),
	})
	require.NoError(e.t, err)
	require.Len(e.t, res.Changes, len(res.Claims))
	requireStatusFilled(e.t, res.Changes)
	return res
}

// get loads a task that must exist.
func (e *env) get(taskID string) *queue.TaskState {
	e.t.Helper()
	ts, err := e.s.GetTask(e.ctx, taskID)
	require.NoError(e.t, err, "loading %s", taskID)
	return ts
}

// counts returns TaskQueueCounts of testQueue.
func (e *env) counts(now time.Time) (pending, claimed int) {
	e.t.Helper()
	p, c, err := e.s.TaskQueueCounts(e.ctx, testQueue, now)
	require.NoError(e.t, err)
	return p, c
}

// Transitions used as Apply functions.

func report(kind string, runID int, now time.Time) func(*queue.TaskState, *queue.Transition) error {
	return func(ts *queue.TaskState, tr *queue.Transition) error {
		switch kind {
		case queue.StateCompleted:
			return ts.ReportCompleted(runID, now, tr)
		case queue.StateFailed:
			return ts.ReportFailed(runID, now, tr)
		}
		return ts.ReportException(runID, kind, now, tr)
	}
}

func cancel(now time.Time) func(*queue.TaskState, *queue.Transition) error {
	return func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Cancel(now, tr) }
}

func rerun(now time.Time) func(*queue.TaskState, *queue.Transition) error {
	return func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Rerun(now, tr) }
}

func schedule(now time.Time) func(*queue.TaskState, *queue.Transition) error {
	return func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Schedule(now, tr) }
}

// bring creates taskID at Epoch and drives it into state: unscheduled
// (through a self-dependency), pending, running (claimed at Epoch),
// completed, failed or exception (malformed-payload, resolved at Epoch+1s).
func (e *env) bring(taskID, state string, mutate ...func(*queue.Task)) *queue.TaskState {
	e.t.Helper()
	if state == queue.StateUnscheduled {
		mutate = append([]func(*queue.Task){withDeps(taskID)}, mutate...)
	}
	e.create(taskID, Epoch, mutate...)
	if state == queue.StateUnscheduled || state == queue.StatePending {
		return e.get(taskID)
	}
	e.claim(taskID, Epoch)
	switch state {
	case queue.StateCompleted, queue.StateFailed:
		e.mustApply(taskID, Epoch.Add(time.Second), report(state, 0, Epoch.Add(time.Second)))
	case queue.StateException:
		e.mustApply(taskID, Epoch.Add(time.Second), report(queue.ReasonMalformedPayload, 0, Epoch.Add(time.Second)))
	}
	ts := e.get(taskID)
	require.Equal(e.t, state, ts.State())
	return ts
}

// eventRef identifies one event of a change for comparison.
type eventRef struct {
	TaskID string
	Kind   string
	RunID  int
}

func (r eventRef) String() string { return fmt.Sprintf("%s/%s/%d", r.TaskID, r.Kind, r.RunID) }

func ev(taskID, kind string, runID int) eventRef { return eventRef{taskID, kind, runID} }

// eventRefs flattens the events of changes in order.
func eventRefs(changes []store.Change) []eventRef {
	out := []eventRef{}
	for _, c := range changes {
		for _, e := range c.Events {
			out = append(out, eventRef{c.Task.TaskID, e.Kind, e.RunID})
		}
	}
	return out
}

func requireEvents(t *testing.T, changes []store.Change, want ...eventRef) {
	t.Helper()
	if want == nil {
		want = []eventRef{}
	}
	require.Equal(t, want, eventRefs(changes))
}

// requireStatusFilled checks that every event carries the status it
// announces: task-defined the status before the first run, every other
// event the task's status after the whole change.
func requireStatusFilled(t *testing.T, changes []store.Change) {
	t.Helper()
	for _, c := range changes {
		for _, e := range c.Events {
			require.NotNil(t, e.Status, "event %s of %s has no status", e.Kind, c.Task.TaskID)
			require.Equal(t, c.Task.TaskID, e.Status.TaskID)
			if e.Kind == queue.EventTaskDefined {
				require.Equal(t, queue.StateUnscheduled, e.Status.State)
				require.Empty(t, e.Status.Runs)
				require.Equal(t, -1, e.RunID)
				continue
			}
			require.Equal(t, c.Task.Status(), *e.Status, "event %s of %s", e.Kind, c.Task.TaskID)
		}
	}
}

// requireQueueError requires err to be a *queue.Error of the kind.
func requireQueueError(t *testing.T, err error, kind queue.ErrorKind) *queue.Error {
	t.Helper()
	var qe *queue.Error
	require.True(t, errors.As(err, &qe), "want a *queue.Error, got %v", err)
	require.Equal(t, kind, qe.Kind, "error %q", qe.Message)
	return qe
}

// qt converts to a queue.Time pointer.
func qt(t time.Time) *queue.Time {
	v := queue.NewTime(t)
	return &v
}

// ids lists the task ids of task states.
func ids(tasks []*queue.TaskState) []string {
	out := []string{}
	for _, t := range tasks {
		out = append(out, t.TaskID)
	}
	return out
}

// changedIDs lists the task ids of changes in order.
func changedIDs(changes []store.Change) []string {
	out := []string{}
	for _, c := range changes {
		out = append(out, c.Task.TaskID)
	}
	return out
}

func testCreateClaimComplete(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch
	res := e.create("aaaaaaaaQaaaaaaaaaaaaQ", now)
	require.Equal(t, queue.StatePending, res.Task.State())
	requireEvents(t, res.Changes, ev("aaaaaaaaQaaaaaaaaaaaaQ", queue.EventTaskDefined, -1), ev("aaaaaaaaQaaaaaaaaaaaaQ", queue.EventTaskPending, 0))

	claims := e.claimWork(testQueue, 4, now)
	require.Len(t, claims.Claims, 1)
	require.Equal(t, queue.StateRunning, claims.Claims[0].Task.State())

	done := e.mustApply("aaaaaaaaQaaaaaaaaaaaaQ", now, report(queue.StateCompleted, 0, now))
	require.Equal(t, queue.StateCompleted, done.Task.State())
	require.NotNil(t, done.Changes[0].GroupResolved)
}

// hubOf is the wake-up hub of a store under test: the drivers' stores
// are *store.DB, which is both.
func hubOf(s store.Store) store.WorkHub { return s.(store.WorkHub) }
