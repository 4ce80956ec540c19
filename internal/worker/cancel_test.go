package worker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// heartbeatScript is a shell loop appending to $HB/<name> every 50 ms
// through a descriptor on which it holds the file's lock. Task processes
// hold locks rather than write their PIDs because PIDs inside the
// sandbox's PID namespace mean nothing outside it; the kernel frees the
// lock when the last process holding the descriptor (the loop, or a
// daemon it left behind) ends.
func heartbeatScript(name string) string {
	return `exec 9>>"$HB/` + name + `"; flock 9; while :; do echo beat >&9; sleep 0.05; done`
}

// alive reports whether a process still holds each heartbeat's lock:
// false for a file not (yet) created, or whose processes all ended.
func alive(files ...string) []bool {
	out := make([]bool, len(files))
	for i, f := range files {
		fd, err := os.Open(f)
		if err != nil {
			continue
		}
		err = syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		out[i] = errors.Is(err, syscall.EWOULDBLOCK)
		fd.Close() // frees the lock if this look took it
	}
	return out
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
	testclock.WaitFor(t, time.Minute, "the task's processes", func() bool { return !slices.Contains(alive(files...), false) })
	b.fake.Cancel(id)
	// The status poll or the next reclaim sees the cancel (maxRunTime is
	// far beyond the test's patience).
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code)
	case <-time.After(2 * time.Minute):
		t.Fatal("worker did not abandon the cancelled task")
	}
	testclock.WaitFor(t, time.Minute, "the cancelled task's processes to end", func() bool { return !slices.Contains(alive(files...), true) })
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
