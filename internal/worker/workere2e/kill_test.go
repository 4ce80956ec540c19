package workere2e

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	hopperworker "github.com/hopper-ci/hopper/internal/worker"
)

// TestKill9ClaimExpiresAndAnotherWorkerRetries kills a worker outright
// while its task runs. Nothing resolves the run, so the queue's claim
// expiry must (exception/claim-expired, with a "retry" run), a second
// worker must run the retry to completion, and nothing the dead worker's
// task started may outlive it: neither the command, nor a backgrounded
// grandchild, nor a setsid daemon (the sandbox init dies with the worker
// and takes its PID namespace along).
func TestKill9ClaimExpiresAndAnotherWorkerRetries(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("kill9")
	hb := heartbeatDir(t)
	files := []string{filepath.Join(hb, "child")}
	full := ""
	if reason := strictSandboxMissing(t); reason != "" {
		// Without the sandbox only the direct child has a parent-death
		// signal: grandchildren and daemons would live on, so the task
		// starts none.
		t.Logf("checking the direct child only: %s", reason)
	} else {
		full = "yes"
		files = append(files, filepath.Join(hb, "grandchild"), filepath.Join(hb, "daemon"))
	}
	// Run 0 hangs with a grandchild and a daemon; run 1 finishes at once.
	id := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `if [ "$RUN_ID" = 1 ]; then echo "second run finished"; exit 0; fi
if [ -n "$FULL" ]; then
  (` + heartbeat("grandchild") + `) &
  setsid sh -c '` + heartbeat("daemon") + `' </dev/null >/dev/null 2>&1 &
fi
` + heartbeat("child")}},
		"env":        map[string]string{"HB": hb, "FULL": full},
		"maxRunTime": 300,
	}, nil)

	a := startWorkerWith(t, queue, workerOpts{id: "kill9-a"})
	waitAlive(t, true, "the task's processes", files...)
	st := status(t, id)
	require.Equal(t, tcclient.StateRunning, st.State)
	require.Equal(t, "kill9-a", st.Runs[0].WorkerID)

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	killedAt := time.Now()
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("worker A survived SIGKILL")
	}
	waitAlive(t, false, "the task's processes to end with their SIGKILLed worker", files...)
	t.Logf("every task process stopped within %s of the SIGKILL", time.Since(killedAt).Round(time.Millisecond))

	// Claims last 4 s and a reclaim happens halfway, so takenUntil is at
	// most 4 s after the kill; the queue's resolver ticks every 250 ms.
	require.Eventually(t, func() bool {
		st = status(t, id)
		return len(st.Runs) == 2
	}, 10*time.Second, 100*time.Millisecond, "claim of run 0 did not expire")
	t.Logf("claim expired %s after the SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	require.Equal(t, tcclient.StateException, st.Runs[0].State)
	require.Equal(t, "claim-expired", st.Runs[0].ReasonResolved)
	require.Equal(t, "retry", st.Runs[1].ReasonCreated)
	require.Equal(t, tcclient.StatePending, st.Runs[1].State)
	// The crashed run keeps only what was published at its start: the live
	// log reference (to a server that died with the worker), no backing log.
	arts := artifactsByName(t, id, 0)
	require.NotContains(t, arts, "public/logs/live_backing.log")
	require.Equal(t, tcclient.StorageReference, arts["public/logs/live.log"].StorageType)

	// Worker B takes over A's work dir: at start it must remove the task
	// cgroups A left behind, and at exit its own.
	workDir := filepath.Join(filepath.Dir(a.configFile), "work")
	leftovers := cgroupDirs(t, hopperworker.CgroupName(workDir))
	t.Logf("cgroup directories left by the crashed worker: %v", leftovers)
	b := startWorkerWith(t, queue, workerOpts{id: "kill9-b", tasks: 1, config: map[string]any{"workDir": workDir}})
	require.Equal(t, 0, b.wait(t, 30*time.Second))
	require.Empty(t, cgroupDirs(t, hopperworker.CgroupName(workDir)), "cgroups outlived the worker that took over")
	st = status(t, id)
	require.Equal(t, tcclient.StateCompleted, st.State)
	require.Len(t, st.Runs, 2)
	require.Equal(t, "kill9-a", st.Runs[0].WorkerID)
	require.Equal(t, "kill9-b", st.Runs[1].WorkerID)
	require.Equal(t, tcclient.StateCompleted, st.Runs[1].State)
	require.Contains(t, backingLog(t, id, 1), "second run finished")
}

// cgroupDirs lists the directories named name in the cgroup hierarchies
// (a few levels down: a worker makes its cgroups under its own).
func cgroupDirs(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"/sys/fs/cgroup/" + name, "/sys/fs/cgroup/*/" + name,
		"/sys/fs/cgroup/*/*/" + name, "/sys/fs/cgroup/*/*/*/" + name, "/sys/fs/cgroup/*/*/*/*/" + name} {
		m, err := filepath.Glob(pattern)
		require.NoError(t, err)
		out = append(out, m...)
	}
	return out
}
