package gctune

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		live uint64
		want int
	}{
		{"nothing measured yet", 0, MaxPercent},
		{"a tiny heap is capped at 5×", 4 * mib, MaxPercent},
		{"a busy server's heap may reach 64 MiB", 16 * mib, 300},
		{"12 MiB is capped", 12 * mib, MaxPercent},
		{"24 MiB may reach 64 MiB", 24 * mib, 166},
		{"from half of 64 MiB, Go's default", 32 * mib, 100},
		{"just under half", 31 * mib, 106},
		{"a large heap, still Go's default", 1024 * mib, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Percent(tc.live))
		})
	}
}

// TestStart: the tuner sets the ratio from the live heap at once and stops
// when told.
func TestStart(t *testing.T) {
	old := debug.SetGCPercent(12345)
	defer debug.SetGCPercent(old)
	stop := Start()
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	require.Eventually(t, func() bool {
		metrics.Read(sample)
		p := int(sample[0].Value.Uint64())
		return p >= MinPercent && p <= MaxPercent
	}, 5*time.Second, 10*time.Millisecond)
	stop()
}
