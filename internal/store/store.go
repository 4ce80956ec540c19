// Package store persists hopper's queue: tasks with their runs, dependency
// edges, task groups, task queues and workers, artifacts, clients and roles.
//
// The interface is shaped around queue operations rather than tables. Every
// operation that changes a task runs in one transaction: it locks the task,
// lets the pure state machine of package queue mutate it, saves it, and
// applies the consequences (the pending index, dependents whose last
// dependency was satisfied, task-group resolution) before committing.
//
// One SQL implementation (this package) serves both drivers; the sqlite and
// postgres sub-packages supply the connection, the dialect, the embedded
// migrations and the cross-process wake-up.
package store

import (
	"errors"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// ErrNotFound is returned when the requested entity does not exist.
var ErrNotFound = errors.New("not found")

// Store is hopper's persistence: one small interface per service, each in
// the file of its rows. The in-process wake-up hub that waiting claimWork
// calls use is not part of it: see WorkHub (*DB is both).
type Store interface {
	// The queue's own rows: tasks (tasks.go, with create.go, claim.go,
	// transition.go and expire.go), task groups (groups.go), task queues
	// and workers (queues.go) and artifacts (artifacts.go).
	TaskStore
	TaskGroupStore
	TaskQueueStore
	ArtifactStore

	// What the built-in superseder reads (superseder.go).
	SupersederStore

	// The Auth service's clients and roles (clients.go).
	AuthStore

	// The object service (objects.go) and the purge-cache service
	// (purgecache.go).
	ObjectStore
	PurgeCacheStore

	// The Index and Secrets services (index.go, secrets.go).
	IndexStore
	SecretStore

	// Hooks (hooks.go).
	HookStore

	// The login service's sign-ins and sessions (login.go), and the
	// people it has seen (loginidentity.go).
	LoginStore
	LoginIdentityStore

	// Flow control (flow.go).
	FlowStore

	// Finding tasks without their taskId (history.go).
	HistoryStore

	// Workers online and busy (liveness.go).
	LivenessStore

	// The forge integration (github.go, githubchecks.go).
	GithubStore
	GithubCheckStore

	// The Worker Manager service (workermanager.go).
	WorkerManagerStore

	// The Notify service's outbox and denylist (notify.go).
	NotifyStore

	// The services' outbox: work owed because of a change elsewhere,
	// claimed under a lease (outbox.go).
	OutboxStore

	// hopper as an OpenID issuer for tasks: signing keys and what the
	// forge integration vouches for (identity.go).
	IdentityStore

	// Which replica holds a worker's tunnel or interactive agent
	// (endpoints.go).
	EndpointStore

	Close() error
}

// WorkHub is the in-process wake-up hub (hub.go) as claimWork calls use
// it: not persistence, but *DB's, since the creates and claims of this
// process feed it.
type WorkHub interface {
	// SubscribePending registers a waiter for runs becoming pending in the
	// task queue, from this process or (where the driver supports it) from
	// another process sharing the database; the waiter claims up to
	// capacity runs at once. ch receives a value when the waiter should
	// try to claim: waiters are woken in turn, as many as the new runs
	// need, not all at once (see Hub). cancel releases the subscription.
	SubscribePending(taskQueueID string, capacity int) (ch <-chan struct{}, cancel func())
	// SubscribePendingFunc is SubscribePending for a waiter with no
	// goroutine blocked on ch: woken runs, in a goroutine of its own, each
	// time a wake-up is put in ch.
	SubscribePendingFunc(taskQueueID string, capacity int, woken func()) (ch <-chan struct{}, cancel func())
	// WaitForWork is SubscribePendingFunc for a claimWork call: while the
	// call is armed (Waiting.Arm), creates in this process may claim
	// their new runs for the claimant as they create them, and wake the
	// call to take them (Waiting.Claimed). The call must Leave, and
	// answer with any claims Leave returns.
	WaitForWork(taskQueueID string, capacity int, c *Claimant, woken func()) *Waiting
	// OnPending registers f, told the task queue of every run made
	// pending that this process learns of (its own commits and, where the
	// driver relays them, other processes'; "" when some may have been
	// missed). f must not block.
	OnPending(f func(taskQueueID string))
}

// Page selects one page of a listing.
type Page struct {
	Limit             int    // 0 means the default (1000)
	ContinuationToken string // opaque; "" starts at the beginning
}

// ErrBadContinuationToken is returned for a token that cannot be decoded.
var ErrBadContinuationToken = errors.New("invalid continuationToken")

// Result carries the changes one operation made, so the caller can publish
// their events after the commit. Changes appear in the order they happened;
// the first is the task the caller asked about (when there is one).
type Result struct {
	Changes []Change
	// Task is the state of the task the operation was about, after it.
	Task *queue.TaskState
}

// Change is one task's change.
type Change struct {
	Task   *queue.TaskState
	Events []queue.Event
	// GroupResolved is set when this change resolved the task's group's last
	// unresolved member.
	GroupResolved *TaskGroup
}

// CreateTaskParams describes a createTask.
type CreateTaskParams struct {
	TaskID string
	Task   *queue.Task
	Now    time.Time
}

// UpdateTaskParams describes a transition of one task. Apply runs inside the
// transaction with the row locked; returning an error rolls back.
type UpdateTaskParams struct {
	TaskID string
	Now    time.Time
	Apply  func(t *queue.TaskState, tr *queue.Transition) error
	// Standing, when set, is filled in the round trip that locks the task,
	// before Apply runs, so a claim or reclaim refuses a stopped or
	// quarantined worker without a look of its own first.
	Standing *WorkerStanding
}

// WorkerStanding is what an UpdateTask reads of a worker with the task:
// whether its pool's manager stopped it, and whether it is quarantined.
type WorkerStanding struct {
	// Worker is the worker asked about; without a WorkerID, the one
	// holding run RunID of the task (in the task's queue), whose
	// quarantine is not read.
	Worker WorkerKey
	RunID  int
	// Stopped and QuarantinedUntil are what was read.
	Stopped          bool
	QuarantinedUntil time.Time
}

// ClaimWorkParams describes a claimWork call.
type ClaimWorkParams struct {
	TaskQueueID string
	WorkerGroup string
	WorkerID    string
	Count       int
	Now         time.Time
	TakenUntil  time.Time
	// RecordRecentTasks appends the claimed runs to the worker's recent
	// tasks in the same transaction.
	RecordRecentTasks bool
	// CheckQuarantine claims nothing for a worker whose record says it is
	// quarantined (read in the same round trip as the pending runs).
	CheckQuarantine bool
	// CheckStopped claims nothing for a worker the Worker Manager has
	// stopped (its record in a pool stopping or stopped), and says so in
	// WorkerStopped. It is read in the claim's first round trip; a claim
	// that would not ask the database (SkipKnownEmpty on a queue known
	// empty, runs handed over) asks it only that.
	CheckStopped bool
	// SkipKnownEmpty returns at once, claiming nothing and touching no
	// database, when an earlier claim of this process found the queue
	// drained and no run was announced since (see Hub). Only a caller that
	// waits on SubscribePending afterwards may set it: that wait is what
	// hears of the next run. With it (or Woken), runs that this process
	// made pending on a queue whose pending runs it knows exactly are
	// claimed as they were handed over, without a look at the queue
	// (handover.go).
	SkipKnownEmpty bool
	// Woken says the hub woke the caller's wait: the call looks even when
	// the queue is known to be empty, since the runs it was woken for do
	// not clear the mark (Hub.Notify), and marks the queue empty as
	// SkipKnownEmpty does when it finds it drained.
	Woken bool
}

// ClaimResult lists the runs a claimWork took.
type ClaimResult struct {
	Claims  []Claimed
	Changes []Change
	// QuarantinedUntil is set, and nothing claimed, when CheckQuarantine
	// found the worker quarantined.
	QuarantinedUntil time.Time
	// WorkerStopped is set, and nothing claimed, when CheckStopped found
	// the worker stopped by its pool's manager.
	WorkerStopped bool
	// Skipped says SkipKnownEmpty applied: the database was not asked.
	Skipped bool
	// WorkerUnknown says RecordRecentTasks found no record of the worker,
	// so its recent tasks were not recorded.
	WorkerUnknown bool
	// Supersessions lists the claims that superseded older tasks of their
	// flow key (flow.go); the caller writes their artifacts.
	Supersessions []Supersession
}

// Claimed is one claimed run.
type Claimed struct {
	Task  *queue.TaskState
	RunID int
}

// TaskGroup is a task group record.
type TaskGroup struct {
	TaskGroupID string
	SchedulerID string
	Expires     time.Time
	Sealed      *time.Time
}

// CancelGroupResult is the outcome of cancelTaskGroup.
type CancelGroupResult struct {
	Group     *TaskGroup
	GroupSize int
	Canceled  []string
	Changes   []Change
}

// PendingEntry is one entry of listPendingTasks.
type PendingEntry struct {
	Task     *queue.TaskState
	RunID    int
	Inserted time.Time
}

// ClaimedEntry is one entry of listClaimedTasks.
type ClaimedEntry struct {
	Task        *queue.TaskState
	RunID       int
	WorkerGroup string
	WorkerID    string
	Claimed     time.Time
}

// TaskQueue is a task queue record.
type TaskQueue struct {
	TaskQueueID    string
	Description    string
	Stability      string
	Expires        time.Time
	LastDateActive time.Time
}

// TaskQueueFilter narrows ListTaskQueues.
type TaskQueueFilter struct {
	ProvisionerID string // only queues "<provisionerId>/..."
}

// TouchTaskQueueParams records a task queue as seen or declared.
type TouchTaskQueueParams struct {
	TaskQueueID string
	Now         time.Time
	Expires     time.Time // never shortens an existing record
	Description *string
	Stability   *string
}

// WorkerFilter selects the workers ListWorkers lists: those of a task
// queue, and if Quarantined is set, only those quarantined (or not) at
// the time asked about.
type WorkerFilter struct {
	TaskQueueID string
	Quarantined *bool
}

// WorkerKey identifies a worker.
type WorkerKey struct {
	TaskQueueID string
	WorkerGroup string
	WorkerID    string
}

// Worker is a worker record.
type Worker struct {
	WorkerKey
	FirstClaim        time.Time
	LastDateActive    time.Time
	Expires           time.Time
	QuarantineUntil   time.Time
	QuarantineDetails []QuarantineDetail
	RecentTasks       []RecentTask
	// Capacity is the most tasks the worker asked for in one claimWork
	// since it came online (TouchWorkerParams.Capacity); 0: never asked.
	Capacity int
}

// QuarantineDetail is one audit entry of quarantineWorker.
type QuarantineDetail struct {
	ClientID        string `json:"clientId"`
	UpdatedAt       string `json:"updatedAt"`
	QuarantineUntil string `json:"quarantineUntil"`
	QuarantineInfo  string `json:"quarantineInfo"`
}

// RecentTask is a {taskId, runId} pair.
type RecentTask struct {
	TaskID string `json:"taskId"`
	RunID  int    `json:"runId"`
}

// RecentTasksParams are runs a worker claimed, for its recent tasks.
type RecentTasksParams struct {
	Key   WorkerKey
	Tasks []RecentTask
}

// TouchWorkerParams records a worker as seen (claimWork, reclaimTask) or
// declared.
type TouchWorkerParams struct {
	Key     WorkerKey
	Now     time.Time
	Expires time.Time // never shortens
	// Capacity is how many tasks the worker asked for (claimWork's
	// tasks); 0 says nothing of it (a reclaim, a declaration). The record
	// keeps the most asked, an idle worker asking for all its slots; a
	// worker unseen for WorkerCapacityAbsence before Now comes back with
	// the capacity it asks for then (it may have been restarted with
	// fewer slots).
	Capacity int
}

// WorkerCapacityAbsence is how long a worker is unseen before its
// recorded capacity starts afresh: longer than a claim lasts by default
// (20 min), so a worker whose slots were all busy, reclaiming its runs,
// was seen in it.
const WorkerCapacityAbsence = time.Hour

// QuarantineWorkerParams describes quarantineWorker.
type QuarantineWorkerParams struct {
	Key             WorkerKey
	Now             time.Time
	QuarantineUntil time.Time
	Detail          QuarantineDetail
}

// Artifact is an artifact record.
type Artifact struct {
	TaskID      string
	RunID       int
	Name        string
	StorageType string
	ContentType string
	Details     []byte // JSON, storage-type specific
	Expires     time.Time
	Present     bool
}

// CreateArtifactParams describes createArtifact. Check runs inside the
// transaction with the task row locked, given the task and any existing
// artifact of that name; it returns the artifact to store (or an error to
// refuse).
type CreateArtifactParams struct {
	TaskID string
	RunID  int
	Name   string
	Now    time.Time
	Check  func(t *queue.TaskState, existing *Artifact) (*Artifact, error)
}

// Client is a stored client. AccessToken holds the sealed (encrypted) token.
type Client struct {
	ClientID           string
	Description        string
	AccessToken        string
	Scopes             []string
	Created            time.Time
	LastModified       time.Time
	LastDateUsed       time.Time
	LastRotated        time.Time
	Expires            time.Time
	Disabled           bool
	DeleteOnExpiration bool
}

// Role is a stored role.
type Role struct {
	RoleID       string
	Scopes       []string
	Description  string
	Created      time.Time
	LastModified time.Time
}
