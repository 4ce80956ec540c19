package worker

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// beating reports whether each heartbeat file exists and still grows
// over a few hundred milliseconds. Task processes write heartbeats rather
// than their PIDs because PIDs inside the sandbox's PID namespace mean
// nothing outside it.
func beating(files ...string) []bool {
	size := func(f string) int64 {
		fi, err := os.Stat(f)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	before := make([]int64, len(files))
	for i, f := range files {
		before[i] = size(f)
	}
	time.Sleep(300 * time.Millisecond)
	out := make([]bool, len(files))
	for i, f := range files {
		out[i] = before[i] >= 0 && size(f) > before[i]
	}
	return out
}

// heartbeatScript starts a background loop appending to $HB/<name>.
func heartbeatScript(name string) string {
	return `while :; do echo beat >> "$HB/` + name + `"; sleep 0.05; done`
}

func TestReclaimConflictKillsProcessGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{claimTimeout: 2 * time.Second})
	hb := t.TempDir()
	require.NoError(t, os.Chmod(hb, 0o777))
	files := []string{filepath.Join(hb, "a"), filepath.Join(hb, "b")}
	daemon := ""
	if os.Geteuid() == 0 {
		// Only the sandbox's PID namespace (which needs root) reaches a
		// daemon that left the process group.
		daemon = "yes"
		files = append(files, filepath.Join(hb, "daemon"))
	}
	id := b.createTask(t, map[string]any{
		"command": [][]string{sh(`(` + heartbeatScript("a") + `) & (` + heartbeatScript("b") + `) &
[ -n "$DAEMON" ] && setsid sh -c '` + heartbeatScript("daemon") + `' & wait`)},
		"env": map[string]string{"HB": hb, "DAEMON": daemon}, "maxRunTime": 600,
	}, taskOpts{})
	b.cfg.NumberOfTasksToRun = 1
	w := b.newWorker(t)
	done := make(chan int, 1)
	go func() {
		code, _ := w.Run(context.Background())
		done <- code
	}()
	require.Eventually(t, func() bool { return !slices.Contains(beating(files...), false) }, 10*time.Second, 20*time.Millisecond)
	cancelledAt := time.Now()
	b.fake.Cancel(id)
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code)
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not abandon the cancelled task")
	}
	// The status poll (every 500 ms) or the next reclaim saw the cancel.
	require.Less(t, time.Since(cancelledAt), 6*time.Second)
	require.NotContains(t, beating(files...), true, "task processes survived the cancel")
	// No report after the cancellation; the log is kept (the queue takes
	// artifacts on a run resolved exception for a while).
	for _, r := range b.fake.Requests() {
		require.NotContains(t, r.Path, "/completed")
		require.NotContains(t, r.Path, "/failed")
		require.NotContains(t, r.Path, "/exception")
	}
	require.NotNil(t, b.fake.Artifacts(id, 0)["public/logs/live_backing.log"], "the cancelled run keeps its log")
	st := b.status(t, id)
	require.Equal(t, "canceled", st.Runs[0].ReasonResolved)
	entries, err := os.ReadDir(filepath.Join(b.cfg.WorkDir, "tasks"))
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestBackingLogUploadFailureResolvesResourceUnavailable: when the store
// keeps refusing the backing log, the live log must not be left pointing at
// a live-log server that is gone: it becomes an error artifact saying why,
// and the run resolves exception/resource-unavailable although the command
// succeeded.
func TestBackingLogUploadFailureResolvesResourceUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	faults := make([]int, 50)
	for i := range faults {
		faults[i] = http.StatusServiceUnavailable
	}
	b.fake.InjectFault("putBlob", faults...)
	id := b.createTask(t, map[string]any{"command": [][]string{sh("echo fine")}, "maxRunTime": 30}, taskOpts{})
	require.Equal(t, ExitOK, b.runN(t, 1))
	st := b.status(t, id)
	require.Equal(t, tcclient.StateException, st.State)
	require.Equal(t, tcclient.ReasonResourceUnavailable, st.Runs[0].ReasonResolved)
	live := b.fake.Artifacts(id, 0)["public/logs/live.log"]
	require.NotNil(t, live)
	require.Equal(t, tcclient.StorageError, live.StorageType)
	require.Equal(t, tcclient.ArtifactFileMissing, live.Reason)
	require.Contains(t, live.Message, "The task log could not be uploaded")
}
