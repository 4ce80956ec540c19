// Package clock is the one interface through which hopper's server side
// reads the time, so that tests inject a fake (internal/testclock) and
// the rules take the time as an argument. It is a leaf every package may
// use without importing the queue's domain.
package clock

import "time"

// Clock tells the time. The server uses the wall clock; tests inject a fake.
type Clock interface {
	Now() time.Time
}

// System is the wall clock.
type System struct{}

// Now returns the current wall-clock time.
func (System) Now() time.Time { return time.Now() }
