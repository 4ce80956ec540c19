package workere2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestSandboxCrashedRunLeavesNothing: a worker killed outright leaves its
// running task's directory behind; the next worker on the same work dir
// removes it before its first claim, so the next task of the same slot
// user cannot read what the crashed one wrote. A directory kept after its
// run (cleanUpTaskDirs false) is taken back from the slot's user, so the
// next task of that user cannot read it either.
func TestSandboxCrashedRunLeavesNothing(t *testing.T) {
	t.Parallel()
	needStrictSandbox(t)
	queue := uniqueQueue("crashdir")
	hb := heartbeatDir(t)
	victim := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `echo "the crashed run's secret" > secret.txt
echo "$TASK_WORKDIR" > "$HB/victim-dir"; sleep 300`}},
		"env": map[string]string{"HB": hb}, "maxRunTime": 600,
	}, func(d *tcclient.TaskDefinition) { d.Retries = new(0) })
	a := strictWorker(t, queue, "crashdir-a", 0, nil)
	dirFile := filepath.Join(hb, "victim-dir")
	require.Eventually(t, func() bool { _, err := os.Stat(dirFile); return err == nil }, 30*time.Second, 50*time.Millisecond)
	raw, err := os.ReadFile(dirFile)
	require.NoError(t, err)
	victimDir := strings.TrimSpace(string(raw))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	<-a.done
	require.FileExists(t, filepath.Join(victimDir, "secret.txt"), "the crash left the task directory")
	require.Eventually(t, func() bool { return status(t, victim).State == tcclient.StateException }, 20*time.Second, 100*time.Millisecond)

	snoop := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `echo "snooping on $D as $(id -un)"
if cat "$D/secret.txt"; then echo READ""-CRASHED-RUN; else echo "crashed run's file: gone"; fi
echo "the kept run's secret" > secret.txt; echo "$TASK_WORKDIR" > "$HB/kept-dir"`}},
		"env": map[string]string{"D": victimDir, "HB": hb}, "maxRunTime": 60,
	}, nil)
	next := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `if cat "$(cat "$HB/kept-dir")/secret.txt"; then echo READ""-KEPT-RUN; else echo "kept run's file: unreadable"; fi`}},
		"env":     map[string]string{"HB": hb}, "maxRunTime": 60,
	}, nil)
	workDir := filepath.Join(filepath.Dir(a.configFile), "work")
	b := strictWorker(t, queue, "crashdir-b", 2, map[string]any{"workDir": workDir, "cleanUpTaskDirs": false})
	require.Equal(t, 0, b.wait(t, 60*time.Second))
	require.Equal(t, tcclient.StateCompleted, status(t, next).State)
	nextLog := backingLog(t, next, 0)
	require.Contains(t, nextLog, "kept run's file: unreadable")
	require.NotContains(t, nextLog, "READ-KEPT-RUN")
	require.Equal(t, tcclient.StateCompleted, status(t, snoop).State)
	log := backingLog(t, snoop, 0)
	require.Contains(t, log, "snooping on "+victimDir+" as hopper-task-1")
	require.Contains(t, log, "crashed run's file: gone")
	require.NotContains(t, log, "READ-CRASHED-RUN")
	require.NoDirExists(t, victimDir)
}
