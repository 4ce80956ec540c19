package poolmember

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRenewAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		left, want time.Duration
	}{
		{96 * time.Hour, 72 * time.Hour},   // a quarter left
		{2 * time.Minute, time.Minute},     // a minute left
		{8 * time.Second, 4 * time.Second}, // half-time for short lifetimes
		{0, 0},
	} {
		require.Equal(t, now.Add(tc.want), renewAt(now, now.Add(tc.left)), "lifetime %s", tc.left)
	}
}
