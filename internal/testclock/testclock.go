// Package testclock is the fake clock of hopper's tests: a clock.Clock
// (and any interface with Now() time.Time) that moves only when told to,
// safe for concurrent use. Fake the clock, never the database. Where real
// time must pass (another process, a real daemon), tests wait on a
// condition with WaitFor instead of sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock. The zero value reads the zero time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward if d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Shifted is the wall clock plus an offset the test moves: for tests whose
// requests are signed with the real time (Hawk allows 15 minutes of skew)
// yet need time to pass. The zero value is the wall clock, in UTC.
type Shifted struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the wall-clock time plus the offset, in UTC.
func (c *Shifted) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset).UTC()
}

// Advance adds d to the offset.
func (c *Shifted) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
