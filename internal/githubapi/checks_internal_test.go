package githubapi

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

// TestCheckConclusion: a resolved run's conclusion, as Taskcluster's
// github service maps it.
func TestCheckConclusion(t *testing.T) {
	for _, tc := range []struct {
		state, reason string
		retriesLeft   int
		want          string
	}{
		{queue.StateCompleted, "completed", 1, "success"},
		{queue.StateFailed, "failed", 1, "failure"},
		{queue.StateException, "deadline-exceeded", 1, "timed_out"},
		{queue.StateException, "canceled", 1, "cancelled"},
		{queue.StateException, "claim-expired", 1, "failure"},
		{queue.StateException, "worker-shutdown", 1, "neutral"},
		{queue.StateException, "malformed-payload", 1, "action_required"},
		{queue.StateException, "resource-unavailable", 1, "failure"},
		{queue.StateException, "internal-error", 1, "failure"},
		{queue.StateException, "intermittent-task", 1, "neutral"},
		{queue.StateException, "intermittent-task", 0, "failure"},
		{queue.StateException, "something-new", 1, "failure"},
	} {
		got := checkConclusion(&queue.Run{State: tc.state, ReasonResolved: tc.reason}, tc.retriesLeft)
		require.Equal(t, tc.want, got, "%s/%s with %d retries left", tc.state, tc.reason, tc.retriesLeft)
	}
}

// TestLogExcerpt: the first and last lines of a log, escapes removed, in
// the budget, on character boundaries.
func TestLogExcerpt(t *testing.T) {
	lines := func(from, to int, prefix string) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			b.WriteString(prefix + strings.Repeat("é", i%7) + "\n")
		}
		return b.String()
	}
	short := "\x1b[31mred\x1b[0m\nplain\n"
	require.Equal(t, "red\nplain", logExcerpt([]byte(short), nil, 1000))
	long := lines(0, 500, "l")
	got := logExcerpt([]byte(long), nil, 100000)
	require.Equal(t, 20+1+200, strings.Count(got, "\n")+1, "20 lines, a gap, 200 lines")
	require.Contains(t, got, "\n…\n")
	for _, budget := range []int{0, 1, 50, 333, 5000} {
		got := logExcerpt([]byte(long), nil, budget)
		require.LessOrEqual(t, len(got), budget+len("…\n"), "budget %d", budget)
		require.True(t, utf8.ValidString(got), "budget %d", budget)
	}
	// With a tail: its first (partial) line is dropped.
	got = logExcerpt([]byte("a\nb\n"), []byte("rtial\nz1\nz2\n"), 1000)
	require.Equal(t, "a\nb\n…\nz1\nz2", got)
	require.Equal(t, "", logExcerpt([]byte(long), nil, -5))
}
