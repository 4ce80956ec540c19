package hooks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/testclock"
)

const lease = 10 * time.Second

// at is 2030-01-01 10:mm:ss.ms UTC.
func at(min, sec, ms int) time.Time {
	return time.Date(2030, 1, 1, 10, min, sec, ms*1e6, time.UTC)
}

func TestNextDue(t *testing.T) {
	t.Parallel()
	every2s := []string{"*/2 * * * * *"}
	minutely := []string{"0 * * * * *"}
	tests := []struct {
		name     string
		schedule []string
		claim    Claim
		want     time.Time
		outage   bool
	}{
		{name: "on time", schedule: minutely,
			claim: Claim{Due: at(1, 0, 0), LastClaimEnd: at(0, 0, 150), At: at(1, 0, 300)}, want: at(2, 0, 0)},
		{name: "first fire of a new hook", schedule: minutely,
			claim: Claim{Due: at(1, 0, 0), At: at(1, 0, 900)}, want: at(2, 0, 0)},
		// A replica claimed 10:00:00 at 10:00:00.3 and died; its lease ran
		// out at 10:00:10.3 and another took the hook over: the next due
		// time is the one after 10:00:00, not after the takeover's clock.
		{name: "takeover of a dead replica's lease", schedule: every2s,
			claim: Claim{Due: at(0, 0, 0), LastClaimEnd: at(0, 10, 300), At: at(0, 11, 0)}, want: at(0, 2, 0)},
		// The takeover recorded 10:00:00 at 10:00:11.05 and goes on with
		// the due times the lease covered.
		{name: "catching up after a takeover", schedule: every2s,
			claim: Claim{Due: at(0, 2, 0), LastClaimEnd: at(0, 11, 50), At: at(0, 11, 60)}, want: at(0, 4, 0)},
		{name: "a takeover later than a poll, within a lease", schedule: every2s,
			claim: Claim{Due: at(0, 0, 0), LastClaimEnd: at(0, 10, 300), At: at(0, 20, 300)}, want: at(0, 2, 0)},
		{name: "after a slow fire", schedule: every2s,
			claim: Claim{Due: at(0, 2, 0), LastClaimEnd: at(0, 6, 500), At: at(0, 6, 600)}, want: at(0, 4, 0)},
		{name: "claimed late by a busy replica, within a lease", schedule: every2s,
			claim: Claim{Due: at(0, 0, 0), LastClaimEnd: at(-1, 58, 100), At: at(0, 9, 0)}, want: at(0, 2, 0)},
		{name: "claimed exactly a lease late", schedule: every2s,
			claim: Claim{Due: at(0, 0, 0), At: at(0, 10, 0)}, want: at(0, 2, 0)},
		// Nobody claimed the hook from 10:01 to 10:05:10: every replica
		// was down. It fires once, for 10:01, and waits for 10:06.
		{name: "outage", schedule: minutely,
			claim: Claim{Due: at(1, 0, 0), LastClaimEnd: at(0, 0, 200), At: at(5, 10, 0)}, want: at(6, 0, 0), outage: true},
		{name: "outage of a new hook", schedule: minutely,
			claim: Claim{Due: at(1, 0, 0), At: at(5, 10, 0)}, want: at(6, 0, 0), outage: true},
		// A replica died firing 10:00:00 and no other took the hook over
		// when its lease ran out at 10:00:10.3: all were down until 10:30.
		{name: "outage after a dead replica's lease", schedule: every2s,
			claim: Claim{Due: at(0, 0, 0), LastClaimEnd: at(0, 10, 300), At: at(30, 0, 500)}, want: at(30, 2, 0), outage: true},
		{name: "outage ending on a due time", schedule: minutely,
			claim: Claim{Due: at(1, 0, 0), At: at(6, 0, 0)}, want: at(7, 0, 0), outage: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSchedule(tc.schedule)
			require.NoError(t, err)
			require.Equal(t, tc.outage, tc.claim.Outage(lease))
			next, ok := s.NextDue(tc.claim, lease)
			require.True(t, ok)
			require.Equal(t, tc.want, next)
		})
	}

	empty, err := ParseSchedule(nil)
	require.NoError(t, err)
	_, ok := empty.NextDue(Claim{Due: at(0, 0, 0), At: at(0, 0, 100)}, lease)
	require.False(t, ok)
}

// hookRow is the part of a hook's stored row the schedule rule reads and
// writes, as the store keeps it.
type hookRow struct {
	due          time.Time
	claimedUntil time.Time
}

// replica is one scheduler in simulate: it polls every second from its
// offset while up, and dies, holding its lease, when it claims the hook
// at or after dieAt.
type replica struct {
	offset   time.Duration
	down, up time.Time // down from down until up (zero: never down)
	dieAt    time.Time // zero: never dies
	dead     bool
}

func (r *replica) running(now time.Time) bool {
	return !r.dead && (now.Before(r.down) || !now.Before(r.up))
}

// simulate runs replicas polling one hook of the schedule from start to
// end on a test clock, each poll firing every due hook as the firer does
// (claim, fire, record with the next due time), and returns how often
// each due time fired.
func simulate(t *testing.T, schedule []string, start, end time.Time, replicas []*replica) map[time.Time]int {
	t.Helper()
	s, err := ParseSchedule(schedule)
	require.NoError(t, err)
	clock := testclock.New(start)
	first, _ := s.Next(start)
	row := hookRow{due: first}
	fired := map[time.Time]int{}
	for now := clock.Now(); now.Before(end); now = clock.Advance(50 * time.Millisecond) {
		for _, r := range replicas {
			if !r.running(now) || now.Sub(start)%time.Second != r.offset {
				continue
			}
			for !now.Before(row.due) && !now.Before(row.claimedUntil) && !r.dead {
				claim := Claim{Due: row.due, LastClaimEnd: row.claimedUntil, At: now}
				row.claimedUntil = now.Add(lease)
				if !r.dieAt.IsZero() && !now.Before(r.dieAt) {
					r.dead = true // killed mid-fire: the lease stays
					break
				}
				fired[claim.Due]++
				row.due, _ = s.NextDue(claim, lease)
				row.claimedUntil = now // the fire is recorded at once
			}
		}
	}
	return fired
}

// TestTakeoverFiresEveryDueTime drives the rule with replicas on a test
// clock: a replica killed while firing leaves the hook to another when
// its lease runs out, which fires every due time since, once each; due
// times are lost only while no replica is up.
func TestTakeoverFiresEveryDueTime(t *testing.T) {
	t.Parallel()
	every2s := []string{"*/2 * * * * *"}
	start, end := at(0, 0, 0).Add(-time.Second), at(2, 0, 0)
	dueTimes := func(from, to time.Time) []time.Time {
		var out []time.Time
		for d := from; d.Before(to); d = d.Add(2 * time.Second) {
			out = append(out, d)
		}
		return out
	}
	tests := []struct {
		name     string
		replicas []*replica
		// lost are the due times that must not fire; every other due time
		// from 10:00:00 fires once.
		lost []time.Time
	}{
		{name: "one replica", replicas: []*replica{{offset: 300 * time.Millisecond}}},
		{name: "two replicas", replicas: []*replica{{offset: 300 * time.Millisecond}, {offset: 700 * time.Millisecond}}},
		// A dies firing 10:00:20 at 10:00:20.3; its lease runs out at
		// 10:00:30.3 and B fires 10:00:20 to 10:00:30 at 10:00:30.7.
		{name: "the firing replica is killed", replicas: []*replica{
			{offset: 300 * time.Millisecond, dieAt: at(0, 20, 0)},
			{offset: 700 * time.Millisecond}}},
		// The same, and B is down from 10:00:25 to 10:01:00: an outage
		// from A's death to B's return. 10:00:20 fires once (B claims it at
		// 10:01:00.7) and the schedule resumes after that.
		{name: "the firing replica is killed during an outage", replicas: []*replica{
			{offset: 300 * time.Millisecond, dieAt: at(0, 20, 0)},
			{offset: 700 * time.Millisecond, down: at(0, 25, 0), up: at(1, 0, 0)}},
			lost: dueTimes(at(0, 22, 0), at(1, 2, 0))},
		// Both down from 10:00:09 to 10:00:15: shorter than a lease, so
		// nothing counts as missed.
		{name: "a short outage", replicas: []*replica{
			{offset: 300 * time.Millisecond, down: at(0, 9, 0), up: at(0, 15, 0)},
			{offset: 700 * time.Millisecond, down: at(0, 9, 0), up: at(0, 15, 0)}}},
		// Both down from 10:00:09 to 10:00:40: 10:00:10 fires at 10:00:40.3
		// and the hook waits for 10:00:42.
		{name: "a long outage", replicas: []*replica{
			{offset: 300 * time.Millisecond, down: at(0, 9, 0), up: at(0, 40, 0)},
			{offset: 700 * time.Millisecond, down: at(0, 9, 0), up: at(0, 40, 0)}},
			lost: dueTimes(at(0, 12, 0), at(0, 42, 0))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fired := simulate(t, every2s, start, end, tc.replicas)
			lost := map[time.Time]bool{}
			for _, d := range tc.lost {
				lost[d] = true
			}
			// The last due time may still be in flight at the end.
			for _, d := range dueTimes(at(0, 0, 0), end.Add(-2*time.Second)) {
				want := 1
				if lost[d] {
					want = 0
				}
				require.Equal(t, want, fired[d], "fires of %s", d.Format(time.TimeOnly))
			}
		})
	}
}
