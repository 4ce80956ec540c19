package workermanager_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	wm "github.com/hopper-ci/hopper/internal/workermanager"
)

// TestShouldTerminate: a removed worker is told to stop only once it
// holds nothing it may still be working on; before, generic-worker asked
// to stop with a task running never exited.
func TestShouldTerminate(t *testing.T) {
	t.Parallel()
	running := wm.RunHold{TaskID: "T", RunID: 0, Running: true, TakenUntil: now.Add(20 * time.Minute)}
	resolved := wm.RunHold{TaskID: "T", RunID: 0, TakenUntil: now.Add(time.Minute)}
	lost := wm.RunHold{TaskID: "T", RunID: 0, TakenUntil: now.Add(-time.Second)}
	for _, tc := range []struct {
		name  string
		state wm.State
		// expired says the worker's expiry has passed.
		expired bool
		holds   []wm.RunHold
		want    bool
	}{
		{"a running worker goes on", wm.StateRunning, false, nil, false},
		{"an expired worker stops", wm.StateRunning, true, nil, true},
		{"a removed worker holding nothing stops", wm.StateStopped, false, nil, true},
		{"a removed dynamic worker holding nothing stops", wm.StateStopping, false, nil, true},
		{"a removed worker still holding a run goes on", wm.StateStopped, false, []wm.RunHold{running}, false},
		{"a removed worker whose resolved run's claim lasts goes on", wm.StateStopped, false, []wm.RunHold{lost, resolved}, false},
		{"a removed worker whose resolved runs' claims ran out stops", wm.StateStopped, false, []wm.RunHold{lost}, true},
		{"holds do not keep a worker that was not removed", wm.StateRunning, true, []wm.RunHold{running}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &wm.Worker{State: tc.state, Expires: now.Add(time.Hour)}
			if tc.expired {
				w.Expires = now.Add(-time.Hour)
			}
			got, reason := w.ShouldTerminate(tc.holds, now)
			require.Equal(t, tc.want, got, reason)
			require.NotEmpty(t, reason)
		})
	}
}

func TestKeyOfClientID(t *testing.T) {
	t.Parallel()
	w := &wm.Worker{WorkerPoolID: "prov/type", WorkerGroup: "g", WorkerID: "w", ProviderID: "static"}
	k, ok := wm.KeyOfClientID(w.ClientID())
	require.True(t, ok)
	require.Equal(t, w.Key(), k)
	for _, id := range []string{"static/root", "worker/", "worker/static/prov/type/g", "worker/static/prov/type/g/w/x", "worker/static//type/g/w", "task-client/x"} {
		_, ok := wm.KeyOfClientID(id)
		require.False(t, ok, id)
	}
}
