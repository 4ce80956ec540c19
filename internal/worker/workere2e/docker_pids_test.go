package workere2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestDockerPidsLimit: maxTaskProcesses is the container's pids limit, so
// a fork loop stops at it (before, only the memory limit stopped one). The
// processes are counted with shell builtins, which need no fork.
func TestDockerPidsLimit(t *testing.T) {
	queue := uniqueQueue("docker-pids")
	id := createTaskWith(t, queue, dockerPayload(`(i=0; while [ $i -lt 300 ]; do sleep 60 & i=$((i+1)); done) 2>/dev/null
set -- /proc/[0-9]*; echo "processes: $#"`, nil), nil)
	w := startDockerWorker(t, queue, workerOpts{id: "docker-pids", tasks: 1, config: map[string]any{"maxTaskProcesses": 64}})
	require.Equal(t, 0, w.wait(t, 90*time.Second))
	log := logOf(t, id)
	require.Equal(t, tcclient.StateCompleted, status(t, id).State, log)
	require.Contains(t, log, "Limits: processes 64")
	n := regexpInt(t, log, `processes: (\d+)`)
	require.LessOrEqual(t, n, 64, "the fork loop ran past the pids limit")
	require.Greater(t, n, 32, "the fork loop ran into the limit")
}
