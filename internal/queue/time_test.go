package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/queue"
)

var _ clock.Clock = clock.System{}

// TestTimeUnmarshalCanonical checks that any RFC 3339 input is truncated to
// milliseconds and re-serialised in Taskcluster's canonical form
// (docs/contract/queue.md §1.4).
func TestTimeUnmarshalCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // canonical form; "" means an error is expected
	}{
		{"canonical stays canonical", `"2024-05-01T12:34:56.789Z"`, `"2024-05-01T12:34:56.789Z"`},
		{"microseconds are truncated", `"2024-05-01T12:34:56.789123Z"`, `"2024-05-01T12:34:56.789Z"`},
		{"truncated, not rounded", `"2024-05-01T12:34:56.789999999Z"`, `"2024-05-01T12:34:56.789Z"`},
		{"no fraction gains three zeros", `"2024-05-01T12:34:56Z"`, `"2024-05-01T12:34:56.000Z"`},
		{"one fractional digit", `"2024-05-01T12:34:56.7Z"`, `"2024-05-01T12:34:56.700Z"`},
		{"offset converted to UTC", `"2024-05-01T14:34:56.789+02:00"`, `"2024-05-01T12:34:56.789Z"`},
		{"negative offset crossing midnight", `"2024-04-30T23:00:00.001-01:00"`, `"2024-05-01T00:00:00.001Z"`},
		{"number", `1714566896789`, ""},
		{"date only", `"2024-05-01"`, ""},
		{"garbage", `"soon"`, ""},
		{"unterminated string", `"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got queue.Time
			err := got.UnmarshalJSON([]byte(tt.in))
			if tt.want == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			out, err := json.Marshal(got)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(out))

			// A second round trip is stable and exact.
			var again queue.Time
			require.NoError(t, json.Unmarshal(out, &again))
			require.True(t, got.Equal(again.Time))
			require.Equal(t, got.Millis(), again.Millis())
		})
	}
}

func TestTimeNull(t *testing.T) {
	t.Parallel()
	got := qt(time.Hour)
	require.NoError(t, json.Unmarshal([]byte(`null`), &got))
	require.True(t, got.IsZero())
}

func TestTimeInStruct(t *testing.T) {
	t.Parallel()
	type doc struct {
		At   queue.Time  `json:"at"`
		Opt  *queue.Time `json:"opt,omitempty"`
		Zero *queue.Time `json:"zero,omitempty"`
	}
	var d doc
	require.NoError(t, json.Unmarshal([]byte(`{"at":"2024-05-01T12:34:56.789654Z","opt":"2024-05-01T12:34:57Z"}`), &d))
	require.Nil(t, d.Zero)
	out, err := json.Marshal(d)
	require.NoError(t, err)
	require.JSONEq(t, `{"at":"2024-05-01T12:34:56.789Z","opt":"2024-05-01T12:34:57.000Z"}`, string(out))
	require.Contains(t, string(out), `"2024-05-01T12:34:56.789Z"`, "exact canonical text, not just an equal instant")
}

func TestNewTime(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	in := time.Date(2024, 5, 1, 18, 4, 56, 789_654_321, zone)
	got := queue.NewTime(in)
	require.Equal(t, time.UTC, got.Location())
	require.Equal(t, 789_000_000, got.Nanosecond())
	require.Equal(t, "2024-05-01T12:34:56.789Z", got.String())
}

func TestMillis(t *testing.T) {
	t.Parallel()
	const ms = int64(1714566896789) // 2024-05-01T12:34:56.789Z
	got := queue.FromMillis(ms)
	require.Equal(t, "2024-05-01T12:34:56.789Z", got.String())
	require.Equal(t, ms, got.Millis())
	require.Equal(t, time.UTC, got.Location())
	require.Equal(t, ms, queue.NewTime(time.UnixMicro(ms*1000+999)).Millis())
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	got, err := queue.ParseTime("2024-05-01T12:34:56.789123+00:00")
	require.NoError(t, err)
	require.Equal(t, "2024-05-01T12:34:56.789Z", got.String())
	require.Equal(t, queue.FromMillis(1714566896789), got)

	_, err = queue.ParseTime("yesterday")
	require.Error(t, err)
	require.Contains(t, err.Error(), "yesterday")
}

// TestCanonicalFormMatchesLayout: the digit-by-digit form is queue.TimeLayout's,
// across the years it handles and beyond them.
func TestCanonicalFormMatchesLayout(t *testing.T) {
	t.Parallel()
	for _, tm := range []time.Time{
		time.Date(2026, 11, 21, 23, 5, 9, 7_000_000, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(5, 2, 3, 4, 5, 6, 120_000_000, time.FixedZone("x", 3600)),
		time.Date(12345, 6, 7, 8, 9, 10, 0, time.UTC),
		time.Date(-3, 6, 7, 8, 9, 10, 0, time.UTC),
	} {
		want := tm.UTC().Format(queue.TimeLayout)
		require.Equal(t, want, queue.Time{Time: tm}.String(), "%v", tm)
		got, err := queue.Time{Time: tm}.MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, `"`+want+`"`, string(got))
	}
}
