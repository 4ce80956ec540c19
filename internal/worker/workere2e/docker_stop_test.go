package workere2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestDockerMaxRunTimeAndCancel: maxRunTime and a cancellation both stop
// the running container, which is then removed. It checks what happens
// and in which order, never how fast (dockerapi's BenchmarkKillToExit
// measures that): the timeouts only stop a hung test.
func TestDockerMaxRunTimeAndCancel(t *testing.T) {
	queue := uniqueQueue("docker-stop")
	slow := dockerPayload("echo started; sleep 600", func(pl map[string]any) { pl["maxRunTime"] = 2 })
	timed := createTaskWith(t, queue, slow, nil)
	// Its maxRunTime is far beyond the test's timeouts: only the
	// cancellation can stop it.
	cancelled := createTaskWith(t, queue, dockerPayload("echo started; sleep 600", func(pl map[string]any) { pl["maxRunTime"] = 3600 }),
		func(d *tcclient.TaskDefinition) { d.Dependencies = []string{timed}; d.Requires = "all-resolved" })
	w := startDockerWorker(t, queue, workerOpts{id: "docker-stop", tasks: 2})

	// maxRunTime: the container's output, then the kill, then the failed
	// run, by which time the container is gone.
	st := waitResolved(t, timed, 3*time.Minute)
	require.Empty(t, containersOf(t, labelTask, timed+"/0"), "a run resolved by the worker leaves no container")
	log := logOf(t, timed)
	require.Equal(t, tcclient.StateFailed, st.State, log)
	requireInOrder(t, log, "\nstarted\n", "Result: ABORTED (maxRunTime exceeded)")
	requireInOrder(t, log, "\nstarted\n", "max run time exceeded (maxRunTime 2 seconds); container killed")
	if m := wallTimeRE.FindStringSubmatch(log); m != nil {
		t.Logf("maxRunTime 2 s: container ran %s", m[1])
	}

	waitRunning(t, cancelled, 0)
	// While the container runs its output streams through the live log.
	waitLiveLog(t, cancelled, "\nstarted\n")
	_, err := shared.admin.CancelTask(context.Background(), cancelled)
	require.NoError(t, err)
	// The worker learns of the cancellation at its next reclaim, kills and
	// removes the container, uploads the log and, its two tasks done,
	// exits: it cannot exit while the container runs.
	require.Equal(t, 0, w.wait(t, 3*time.Minute))
	require.Empty(t, containersOf(t, labelTask, cancelled+"/0"), "the cancelled task's container outlived its worker")
	require.Equal(t, "canceled", status(t, cancelled).Runs[0].ReasonResolved)
	// The container's output streamed before the cancellation is in the
	// uploaded log, then the stop; maxRunTime played no part.
	log = backingLog(t, cancelled, 0)
	requireInOrder(t, log, "\nstarted\n", "=== Task Stopped ===")
	require.NotContains(t, log, "max run time exceeded")
}

// requireInOrder fails unless every one of parts is in s, each after the
// one before.
func requireInOrder(t *testing.T, s string, parts ...string) {
	t.Helper()
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		require.GreaterOrEqual(t, i, 0, "%q missing, or not after %v, in:\n%s", p, parts, s)
		rest = rest[i+len(p):]
	}
}

// TestDockerSIGTERMResolvesWorkerShutdown: an immediate shutdown kills the
// container, resolves the run exception/worker-shutdown (so the queue
// retries it at once) and removes the container.
func TestDockerSIGTERMResolvesWorkerShutdown(t *testing.T) {
	queue := uniqueQueue("docker-term")
	id := createTaskWith(t, queue, dockerPayload("echo started; sleep 600", func(pl map[string]any) { pl["maxRunTime"] = 600 }), nil)
	w := startDockerWorker(t, queue, workerOpts{id: "docker-term"})
	waitRunning(t, id, 0)
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 72, w.wait(t, 60*time.Second))
	st := status(t, id)
	require.Equal(t, "worker-shutdown", st.Runs[0].ReasonResolved)
	log := backingLog(t, id, 0)
	require.Contains(t, log, "started")
	require.Contains(t, log, "Result: ABORTED (worker shutdown)")
	require.Empty(t, containersOf(t, labelWorker, "e2e/docker-term"))
}

// TestDockerBridgeMissingStopsTheWorker: asking for the bridge network of
// a daemon that has none fails at start, not task after task.
func TestDockerBridgeMissingStopsTheWorker(t *testing.T) {
	w := startDockerWorker(t, uniqueQueue("docker-nobridge"), workerOpts{id: "docker-nobridge",
		config: map[string]any{"docker": map[string]any{"network": "bridge"}}})
	require.Equal(t, 1, w.wait(t, 30*time.Second))
}

// TestDockerKill9LeavesNoContainer: a worker killed outright cannot stop
// its container; the same worker, restarted, removes it before claiming.
func TestDockerKill9LeavesNoContainer(t *testing.T) {
	queue := uniqueQueue("docker-k9")
	id := createTaskWith(t, queue, dockerPayload("sleep 600", func(pl map[string]any) { pl["maxRunTime"] = 600 }),
		func(d *tcclient.TaskDefinition) { d.Retries = new(int) })
	w := startDockerWorker(t, queue, workerOpts{id: "docker-k9"})
	c := waitRunning(t, id, 0)
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
	w.wait(t, time.Minute)
	// The worker is gone, and nothing else stops the container.
	var alive bool
	for _, x := range containersOf(t, labelWorker, "e2e/docker-k9") {
		alive = alive || x.ID == c.ID && x.State == "running"
	}
	require.True(t, alive, "the container outlives a worker killed with SIGKILL")

	startDockerWorker(t, queue, workerOpts{id: "docker-k9"})
	require.Eventually(t, func() bool {
		return len(containersOf(t, labelWorker, "e2e/docker-k9")) == 0
	}, 30*time.Second, 50*time.Millisecond, "the restarted worker did not remove its previous life's container")
}

// TestDockerSuperseding runs superseding with docker payloads in both list
// orders: the newest task runs, the older one is resolved superseded.
func TestDockerSuperseding(t *testing.T) {
	for _, order := range []string{"ascending", "descending"} {
		t.Run(order, func(t *testing.T) {
			queue := uniqueQueue("docker-sup")
			var list []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]any{"supersedes": list})
			}))
			t.Cleanup(srv.Close)
			pl := dockerPayload(`echo "running $TASK_ID"`, func(pl map[string]any) { pl["supersederUrl"] = srv.URL + "/list" })
			older := createTaskWith(t, queue, pl, nil)
			newer := createTaskWith(t, queue, pl, nil)
			list = []string{older, newer}
			if order == "descending" {
				list = []string{newer, older}
			}
			w := startDockerWorker(t, queue, workerOpts{id: "docker-sup", tasks: 1,
				config: map[string]any{"superseding": map[string]any{"order": order}}})
			require.Equal(t, 0, w.wait(t, 60*time.Second))

			log := logOf(t, newer)
			require.Equal(t, tcclient.StateCompleted, status(t, newer).State, log)
			require.Contains(t, log, "running "+newer)
			ost := status(t, older)
			require.Equal(t, tcclient.StateException, ost.State)
			require.Equal(t, "superseded", ost.Runs[0].ReasonResolved)
			var by map[string]any
			require.NoError(t, json.Unmarshal([]byte(fetchArtifact(t, older, 0, "public/superseded-by.json").body), &by))
			require.Equal(t, newer, by["taskId"])
			require.True(t, strings.Contains(fetchArtifact(t, newer, 0, "public/supersedes.json").body, older))
		})
	}
}

// TestDockerCapacityTwo runs two docker tasks at once on one worker: each
// has its own container, its own entry of the same cache and its own
// taskcluster proxy at http://taskcluster.
func TestDockerCapacityTwo(t *testing.T) {
	queue := uniqueQueue("docker-cap2")
	script := `echo "$TASK_ID" > /cache/owner; sleep 1
wget -q -O /dev/null "http://taskcluster/api/queue/v1/task/$TASK_ID" && echo "proxy ok"
echo "owner: $(cat /cache/owner)"`
	pl := dockerPayload(script, func(pl map[string]any) {
		pl["cache"] = map[string]string{"hopper-e2e-shared": "/cache"}
		pl["features"] = map[string]bool{"taskclusterProxy": true}
	})
	scopes := func(d *tcclient.TaskDefinition) { d.Scopes = []string{"docker-worker:cache:hopper-e2e-shared"} }
	a := createTaskWith(t, queue, pl, scopes)
	b := createTaskWith(t, queue, pl, scopes)
	w := startDockerWorker(t, queue, workerOpts{id: "docker-cap2", tasks: 2, config: map[string]any{
		"capacity": 2, "docker": map[string]any{"network": "host"},
	}})
	require.Equal(t, 0, w.wait(t, 60*time.Second))
	var runs []tcclient.Run
	for _, id := range []string{a, b} {
		log := logOf(t, id)
		st := status(t, id)
		require.Equal(t, tcclient.StateCompleted, st.State, log)
		require.Contains(t, log, "proxy ok")
		require.Contains(t, log, "owner: "+id, "a cache entry is never shared by two running tasks")
		runs = append(runs, st.Runs[0])
	}
	require.True(t, runs[0].Started.Before(runs[1].Resolved.Time) && runs[1].Started.Before(runs[0].Resolved.Time),
		"the two tasks ran at the same time")
}
