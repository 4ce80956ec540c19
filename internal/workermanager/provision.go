package workermanager

import (
	"fmt"
	"math"
	"time"
)

// Demand is what the provisioner knows of a dynamic pool at one moment.
type Demand struct {
	// Pending and Claimed are the queue's counts for the pool's task
	// queue.
	Pending, Claimed int
	// Requested, Running and Stopping are the capacities of the pool's
	// workers in those states.
	Requested, Running, Stopping int
}

// ToSpawn is how much capacity the provisioner should request now, as
// Taskcluster's estimator reckons it: idle running capacity is assumed to
// take pending tasks soon; what is left is scaled by the pool's ratio and
// added to what exists (stopping capacity counts until it has stopped, so
// a slow stop never lets the pool exceed its maximum); the result is held
// between minCapacity and maxCapacity, and what exists already is
// subtracted.
func ToSpawn(c Capacity, d Demand) int {
	existing := d.Requested + d.Running
	idle := max(0, existing-d.Claimed)
	pending := max(0, d.Pending-idle)
	nonStopped := existing + d.Stopping
	desired := math.Max(float64(c.Min), math.Min(float64(pending)*c.ScalingRatio+float64(nonStopped), float64(c.Max)))
	spawn := int(math.Ceil(desired)) - nonStopped
	// Never past the maximum, whatever the ratio's rounding.
	spawn = min(spawn, c.Max-nonStopped)
	return max(0, spawn)
}

// WorkersFor is how many workers of capacity per make up at least
// capacity.
func WorkersFor(capacity, per int) int {
	if per < 1 {
		per = 1
	}
	return (capacity + per - 1) / per
}

// Activity is what the queue knows of a worker: when it first claimed
// and when it was last active (zero: never).
type Activity struct {
	FirstClaim, LastDateActive time.Time
}

// Verdict is what the worker scanner decides about one worker.
type Verdict struct {
	// Remove says the worker must go; Reason says why (for the pool's
	// error and the worker-removed event).
	Remove bool
	Reason string
	// Expire says a stopped worker's record may be deleted.
	Expire bool
}

// Scan decides a worker's fate, as Taskcluster's worker scanner does: a
// requested worker that missed its registration deadline and a running
// one that missed its reregistration deadline are removed; a running
// dynamic worker that never claimed work, or stopped claiming, for the
// queue inactivity timeout is removed as a zombie unless the pool needs
// it to stay at its minimum (keep); static workers are never removed for
// inactivity; any worker past its expiry is removed, and a stopped
// worker past its expiry is deleted.
func Scan(w *Worker, providerType string, l Lifecycle, act Activity, keep bool, now time.Time) Verdict {
	switch w.State {
	case StateStopped:
		return Verdict{Expire: now.After(w.Expires)}
	case StateStopping:
		return Verdict{}
	}
	if now.After(w.Expires) {
		return Verdict{Remove: true, Reason: "worker expired"}
	}
	if providerType == ProviderTypeStatic {
		return Verdict{}
	}
	if !w.TerminateAfter.IsZero() && now.After(w.TerminateAfter) {
		if w.State == StateRequested {
			return Verdict{Remove: true, Reason: fmt.Sprintf("registration timeout: the worker did not register within %s", l.registrationDeadline())}
		}
		return Verdict{Remove: true, Reason: "reregistration timeout: the worker did not reregister in time"}
	}
	if w.State != StateRunning || keep {
		return Verdict{}
	}
	idleSince := act.LastDateActive
	if idleSince.IsZero() {
		idleSince = w.RegisteredAt
		if idleSince.IsZero() {
			idleSince = w.Created
		}
	}
	if now.Sub(idleSince) > l.QueueInactivityTimeout {
		if act.FirstClaim.IsZero() {
			return Verdict{Remove: true, Reason: fmt.Sprintf("worker never claimed work within queueInactivityTimeout (%s)", l.QueueInactivityTimeout)}
		}
		return Verdict{Remove: true, Reason: fmt.Sprintf("worker inactive for more than queueInactivityTimeout (%s)", l.QueueInactivityTimeout)}
	}
	return Verdict{}
}
