package queue

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Which runs a claimWork call gets (docs/contract/queue.md §5.6, and flow
// control, docs/flow-control.md), stated as plain Go. The store decides
// the same in SQL, for speed (store/claim.go and store/flow.go read only
// the candidates these rules allow), and applies these functions to what
// it read; the conformance suite (storetest.testClaimRules) checks that
// both drivers hand out exactly what PlanClaim says, run for run.
//
//  1. A run is claimable while it is its task's last run, pending, and the
//     task's deadline is ahead.
//  2. Runs are handed out highest priority first, then in the order they
//     became pending (FIFO): ClaimOrder.
//  3. A task under a flow key's policy is claimable only through its key,
//     one task per key and claim. A key offers a task only while it has
//     pending tasks and room under its limit (FlowKeyState.HasRoom); a
//     claim for count runs looks at the count keys with room claimed least
//     recently (ties by key), so keys take turns (KeysInTurn). Each offers
//     its first pending task in claim order or, with supersede, its newest
//     (NextOfKey); the offers compete with the plain tasks by ClaimOrder.
//  4. Claiming a key's task with supersede resolves the key's older pending
//     tasks exception/superseded (Supersedes); creating a key's task with
//     cancelInProgress cancels the key's running tasks (CancelsInProgress).
//     Either touches only tasks of the same schedulerId and projectId:
//     sharing a task queue and a key name grants no power over others'
//     tasks.

// PendingRun is a task whose last run is pending, as the claim rules see
// it.
type PendingRun struct {
	TaskID   string
	Priority string
	// Seq orders the runs by when they became pending: a lower Seq became
	// pending first.
	Seq      int64
	Deadline time.Time
	// FlowKey is the task's flow key, "" outside flow control.
	FlowKey                string
	SchedulerID, ProjectID string
}

// NewPendingRun describes a task's pending run, which became pending as
// the seq-th.
func NewPendingRun(t *TaskState, seq int64) PendingRun {
	r := PendingRun{TaskID: t.TaskID, Priority: t.Task.Priority, Seq: seq, Deadline: t.Task.Deadline.Time,
		SchedulerID: t.Task.SchedulerID, ProjectID: t.Task.ProjectID}
	if t.Task.Flow.Keyed() {
		r.FlowKey = t.Task.Flow.Key
	}
	return r
}

// Claimable reports whether the run may be claimed at now (rule 1; the
// run is its task's pending last run by construction).
func (r PendingRun) Claimable(now time.Time) bool { return r.Deadline.After(now) }

// ClaimOrder compares two pending runs in the order claims take them
// (rule 2): negative when a goes first.
func ClaimOrder(a, b PendingRun) int {
	if c := cmp.Compare(PriorityWeight(b.Priority), PriorityWeight(a.Priority)); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// FlowKeyState is a flow key's policy and counts as a claim sees them.
type FlowKeyState struct {
	Key              string
	Limit            int // 0: no limit
	Supersede        bool
	Pending, Running int
	// LastClaimed is when a claim last took one of its tasks (zero:
	// never).
	LastClaimed time.Time
}

// HasRoom reports whether the key may offer a task to a claim: it has
// pending tasks and fewer running than its limit.
func (k FlowKeyState) HasRoom() bool {
	return k.Pending > 0 && (k.Limit == 0 || k.Running < k.Limit)
}

// KeysInTurn returns the keys a claim for count runs looks at: those with
// room, least recently claimed first (ties by key), at most count (rule
// 3).
func KeysInTurn(keys []FlowKeyState, count int) []FlowKeyState {
	var out []FlowKeyState
	for _, k := range keys {
		if k.HasRoom() {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b FlowKeyState) int {
		if c := a.LastClaimed.Compare(b.LastClaimed); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out[:min(count, len(out))]
}

// NextOfKey returns the task a key offers a claim at now, from the key's
// pending runs: its newest claimable with supersede, else its first
// claimable in claim order (rule 3).
func NextOfKey(k FlowKeyState, runs []PendingRun, now time.Time) (PendingRun, bool) {
	var (
		next  PendingRun
		found bool
	)
	for _, r := range runs {
		if r.FlowKey != k.Key || !r.Claimable(now) {
			continue
		}
		better := ClaimOrder(r, next) < 0
		if k.Supersede {
			better = r.Seq > next.Seq
		}
		if !found || better {
			next, found = r, true
		}
	}
	return next, found
}

// Supersedes reports whether claiming by, a task of a supersede key,
// resolves other exception/superseded: other is a pending task of the same
// key that became pending before it, of the same schedulerId and projectId
// (rule 4).
func Supersedes(by, other PendingRun) bool {
	return other.FlowKey == by.FlowKey && other.Seq < by.Seq && sameOwner(by, other)
}

func sameOwner(a, b PendingRun) bool {
	return a.SchedulerID == b.SchedulerID && a.ProjectID == b.ProjectID
}

// CancelsOthers reports whether creating a task under policy p may cancel
// other tasks: its key's running ones, with cancelInProgress.
func CancelsOthers(p *FlowPolicy) bool { return p.Keyed() && p.CancelInProgress }

// CancelsInProgress reports whether creating task newID (def) cancels
// other: def's policy says cancelInProgress, and other is another running
// task of the same key and task queue, of the same schedulerId and
// projectId (rule 4).
func CancelsInProgress(newID string, def *Task, other *TaskState) bool {
	p, o := def.Flow, &other.Task
	return CancelsOthers(p) && other.TaskID != newID && other.State() == StateRunning &&
		o.Flow.Keyed() && o.Flow.Key == p.Key && o.TaskQueueID == def.TaskQueueID &&
		o.SchedulerID == def.SchedulerID && o.ProjectID == def.ProjectID
}

// ClaimPlan is what a claim for count runs takes.
type ClaimPlan struct {
	// Runs are the runs claimed, in claim order.
	Runs []PendingRun
	// Superseded lists, for each claimed task of a supersede key that
	// supersedes others, the runs it resolves exception/superseded, oldest
	// first.
	Superseded map[string][]PendingRun
}

// PlanClaim decides which of a task queue's pending runs a claim for count
// runs takes at now, given its flow keys (rules 1–4). runs holds every
// pending run of the queue, keyed or not.
func PlanClaim(runs []PendingRun, keys []FlowKeyState, now time.Time, count int) ClaimPlan {
	var candidates []PendingRun
	for _, r := range runs {
		if r.FlowKey == "" && r.Claimable(now) {
			candidates = append(candidates, r)
		}
	}
	supersede := map[string]bool{}
	for _, k := range KeysInTurn(keys, count) {
		if next, ok := NextOfKey(k, runs, now); ok {
			candidates = append(candidates, next)
			supersede[k.Key] = k.Supersede
		}
	}
	slices.SortFunc(candidates, ClaimOrder)
	plan := ClaimPlan{Runs: candidates[:min(count, len(candidates))]}
	for _, by := range plan.Runs {
		if !supersede[by.FlowKey] {
			continue
		}
		var older []PendingRun
		for _, r := range runs {
			if Supersedes(by, r) {
				older = append(older, r)
			}
		}
		if len(older) > 0 {
			slices.SortFunc(older, func(a, b PendingRun) int { return cmp.Compare(a.Seq, b.Seq) })
			if plan.Superseded == nil {
				plan.Superseded = map[string][]PendingRun{}
			}
			plan.Superseded[by.TaskID] = older
		}
	}
	return plan
}
