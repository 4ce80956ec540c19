package queue

import (
	"bytes"
	"fmt"
	"time"
)

// TimeLayout is Taskcluster's canonical timestamp form: UTC with exactly
// three fractional digits, as JavaScript's Date.prototype.toJSON prints it.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a timestamp that serialises in Taskcluster's canonical form and
// carries millisecond precision, so that equality after a JSON round trip is
// exact (createTask idempotency depends on it).
type Time struct{ time.Time }

// NewTime truncates t to milliseconds in UTC.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// FromMillis converts milliseconds since the Unix epoch.
func FromMillis(ms int64) Time { return Time{time.UnixMilli(ms).UTC()} }

// Millis returns milliseconds since the Unix epoch.
func (t Time) Millis() int64 { return t.UnixMilli() }

// String renders the canonical form.
func (t Time) String() string {
	return string(appendCanonical(make([]byte, 0, len(TimeLayout)), t.Time))
}

// appendCanonical appends t in TimeLayout. Every stored run and every reply
// carries several timestamps, so the common years are written digit by
// digit rather than through the general layout interpreter.
func appendCanonical(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeLayout)
	}
	hour, minute, second := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, second, 2)
	b = append(b, '.')
	b = appendDigits(b, ms, 3)
	return append(b, 'Z')
}

// appendDigits appends n, zero-padded to width digits.
func appendDigits(b []byte, n, width int) []byte {
	var digits [4]byte
	for i := width - 1; i >= 0; i-- {
		digits[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, digits[:width]...)
}

// MarshalJSON renders the canonical form.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(TimeLayout)+2)
	b = append(b, '"')
	b = appendCanonical(b, t.Time)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts any RFC 3339 date-time and truncates it to
// milliseconds.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("timestamp must be a string, got %s", b)
	}
	parsed, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("parsing timestamp %s: %w", b, err)
	}
	*t = NewTime(parsed)
	return nil
}

// ParseTime parses an RFC 3339 date-time into a millisecond Time.
func ParseTime(s string) (Time, error) {
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Time{}, fmt.Errorf("parsing timestamp %q: %w", s, err)
	}
	return NewTime(parsed), nil
}
