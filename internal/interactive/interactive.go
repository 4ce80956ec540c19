// Package interactive holds the rules of interactive tasks that the
// server, the worker and the CLI share: the scope that opens a shell, the
// messages a shell's WebSocket carries, their bounds, and how long a task
// stays alive for its shells. It is a leaf: plain Go, no I/O.
//
// A shell is one WebSocket from the viewer (the console or `hopper task
// shell`) to hopper, which relays it to a WebSocket the worker opened to
// hopper for that session; the worker never listens on a port. Binary
// messages carry the terminal's bytes (keystrokes one way, output the
// other); text messages carry a Control as JSON.
package interactive

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ScopePrefix begins the scope that opens a shell in a task of a task
// queue: interactive:open-shell:<taskQueueId>.
const ScopePrefix = "interactive:open-shell:"

// ShellScope is the scope that opens a shell in the tasks of taskQueueID.
func ShellScope(taskQueueID string) string { return ScopePrefix + taskQueueID }

// MaxMessage is the most bytes one message may hold; a larger one ends
// the session. Together with one message in flight per direction (the
// relay copies a message before it reads the next), it bounds what a
// shell holds in the server's memory.
const MaxMessage = 64 << 10

// Size is a terminal's size in character cells.
type Size struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// The bounds of a terminal's size.
const (
	MaxCols = 1000
	MaxRows = 1000
)

// Control is a text message: a resize from the viewer, the shell's end or
// an error from the worker, or the worker being asked for a session by
// hopper.
type Control struct {
	// Resize asks the terminal to take this size (viewer to worker).
	Resize *Size `json:"resize,omitempty"`
	// Exit is the shell's exit code (worker to viewer, the last message).
	Exit *int `json:"exit,omitempty"`
	// Error says why there is no shell (worker to viewer).
	Error string `json:"error,omitempty"`
	// Session asks the worker to open the session of this id (hopper to
	// worker, on the worker's connection for the run).
	Session string `json:"session,omitempty"`
	// Size is the terminal's size at the start of a session (with
	// Session).
	Size *Size `json:"size,omitempty"`
}

// ParseControl decodes and checks a text message.
func ParseControl(b []byte) (Control, error) {
	var c Control
	if err := json.Unmarshal(b, &c); err != nil {
		return Control{}, fmt.Errorf("decoding a control message: %w", err)
	}
	for _, s := range []*Size{c.Resize, c.Size} {
		if s != nil && (s.Cols < 1 || s.Cols > MaxCols || s.Rows < 1 || s.Rows > MaxRows) {
			return Control{}, fmt.Errorf("terminal size %dx%d: want 1 to %d columns and 1 to %d rows", s.Cols, s.Rows, MaxCols, MaxRows)
		}
	}
	return c, nil
}

// Encode renders a control message.
func (c Control) Encode() []byte {
	b, _ := json.Marshal(c)
	return b
}

// DefaultKeepAlive is how long an interactive task stays alive after its
// commands end when its payload names no time (payload.interactive.keepAlive).
const DefaultKeepAlive = 10 * time.Minute

// MaxKeepAlive is the most a payload may ask for.
const MaxKeepAlive = 24 * time.Hour

// MaxSessionsPerRun is how many shells may be open in one run at once.
const MaxSessionsPerRun = 8

// ErrTooManySessions refuses a shell beyond MaxSessionsPerRun.
var ErrTooManySessions = errors.New("too many shells open in this run")

// StayAlive reports whether an interactive task whose commands ended at
// ended stays alive at now: for keepAlive after its end, and while a
// shell is attached.
func StayAlive(ended time.Time, keepAlive time.Duration, attached int, now time.Time) bool {
	return attached > 0 || now.Before(ended.Add(keepAlive))
}
