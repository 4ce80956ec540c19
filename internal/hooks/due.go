package hooks

import "time"

// Which due times of a schedule fire, and what a hook waits for after a
// fire. Taskcluster's hooks service has no leases: every scheduler polls
// every hook, fires those whose next due time has passed with the hook's
// stored taskId (a repeat is the same task), and then sets the next due
// time to the first one after its own clock. Due times that pass while no
// scheduler runs are therefore not made up (the hook fires once, for the
// earliest), and neither are those that pass while a fire is slow.
//
// hopper gives each due time to one replica with a lease on the hook's
// message in the services' outbox (Firer.Lease, 10 s), so a replica that dies firing holds the hook until
// its lease runs out while the other replicas wait. Its rule is: a due
// time is missed only when no replica was up to fire it.
//
//   - After a fire, the hook waits for the schedule's next due time after
//     the one fired, not after the clock. Due times that passed meanwhile
//     (a slow fire, or the lease of a replica that died firing: the one
//     that takes the hook over when the lease ends) are then overdue and
//     fire at once, one after the other, each with its own task.
//   - A hook left unclaimed for longer than a lease after it was due, or
//     after its last claim ended (a fire recorded, or a dead replica's
//     lease run out), was left so because no replica was up: a replica
//     that is up polls every second and is held back by a lease at most a
//     lease long. Then, as in Taskcluster, the due times of that outage are
//     not made up: the due time claimed fires once and the hook waits for
//     the first due time after the claim.

// Claim is what a replica knows of a due hook it has claimed.
type Claim struct {
	// Due is the due time it fires: the hook's stored next due time.
	Due time.Time
	// LastClaimEnd is when the hook's previous claim ended: when a replica
	// recorded its last scheduled fire, or when the lease of a replica
	// that died firing it ran out; zero when it was never claimed (or its
	// schedule changed since).
	LastClaimEnd time.Time
	// At is when this replica claimed it.
	At time.Time
}

// Outage reports whether the hook went unclaimed for longer than lease
// after it was due, or after its last claim ended if that came later: no
// replica was up meanwhile.
func (c Claim) Outage(lease time.Duration) bool {
	since := c.Due
	if c.LastClaimEnd.After(since) {
		since = c.LastClaimEnd
	}
	return c.At.Sub(since) > lease
}

// NextDue is the due time a hook waits for once the claim's due time has
// fired: the schedule's next one after it, or, after an outage, the first
// after the claim. It returns false when the schedule has none.
func (s *Schedule) NextDue(c Claim, lease time.Duration) (time.Time, bool) {
	if c.Outage(lease) {
		return s.Next(c.At)
	}
	return s.Next(c.Due)
}
