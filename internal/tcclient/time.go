package tcclient

import (
	"encoding/json"
	"fmt"
	"time"
)

// TimeLayout is the canonical Taskcluster timestamp layout: UTC with exactly
// three fractional digits, as JavaScript's Date.prototype.toJSON prints it.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a timestamp that marshals in the canonical Taskcluster layout and
// unmarshals any RFC 3339 date-time. It exists so that every time the client
// sends is byte-identical to what the queue echoes back, which matters for
// createTask idempotency comparisons.
type Time struct {
	time.Time
}

// NewTime truncates t to millisecond precision (the queue's precision) and
// wraps it.
func NewTime(t time.Time) Time {
	return Time{Time: t.UTC().Truncate(time.Millisecond)}
}

// String returns the canonical representation, or "" for the zero time.
func (t Time) String() string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeLayout)
}

// MarshalJSON renders the canonical layout; a zero Time becomes null so that
// a forgotten field is visible to the server instead of a year-1 date.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.String())
}

// UnmarshalJSON accepts any RFC 3339 date-time (with or without fractional
// seconds) and null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timestamp must be a string: %w", err)
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("parsing timestamp %q: %w", s, err)
	}
	t.Time = parsed.UTC()
	return nil
}
