package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

func TestLoadOf(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const window = 90 * time.Second
	tests := []struct {
		name     string
		lastSeen time.Time
		capacity int
		held     int
		want     queue.WorkerLoad
	}{
		{"idle, asked a moment ago", now.Add(-10 * time.Second), 4, 0, queue.WorkerLoad{Online: true, Capacity: 4}},
		{"asked exactly a window ago", now.Add(-window), 4, 0, queue.WorkerLoad{Online: true, Capacity: 4}},
		{"stopped: silent past the window, holds nothing", now.Add(-window - time.Millisecond), 4, 0, queue.WorkerLoad{Capacity: 4}},
		{"all slots busy: silent for long, holds runs", now.Add(-15 * time.Minute), 2, 2, queue.WorkerLoad{Online: true, Capacity: 2, Busy: 2}},
		{"holds more than it ever asked for", now.Add(-time.Minute), 1, 3, queue.WorkerLoad{Online: true, Capacity: 3, Busy: 3}},
		{"never seen, holds a run (claimTask)", time.Time{}, 0, 1, queue.WorkerLoad{Online: true, Capacity: 1, Busy: 1}},
		{"never seen, holds nothing", time.Time{}, 0, 0, queue.WorkerLoad{}},
		{"seen in the future (another replica's clock)", now.Add(time.Second), 1, 0, queue.WorkerLoad{Online: true, Capacity: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.LoadOf(tt.lastSeen, tt.capacity, tt.held, now, window))
		})
	}
}
