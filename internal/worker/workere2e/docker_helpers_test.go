package workere2e

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// busyboxImage is the image docker tests run, built offline from the
// host's static busybox.
const busyboxImage = "hopper-test/busybox:1"

// Labels the docker engine puts on task containers.
const (
	labelWorker = "org.hopper-ci.worker"
	labelTask   = "org.hopper-ci.task"
)

// sharedDocker is the private dockerd every docker test uses, started by
// the first of them and stopped by TestMain.
var sharedDocker struct {
	once   sync.Once
	daemon *dockertest.Daemon
	err    error
}

// needDocker skips the test when Docker cannot run here and otherwise
// returns the shared private daemon, with the busybox image built.
func needDocker(t *testing.T) *dockertest.Daemon {
	t.Helper()
	needBinaries(t)
	if m := dockertest.Missing(); m != "" {
		t.Skip("needs Docker: " + m)
	}
	d, err := startSharedDocker()
	require.NoError(t, err, "starting the private dockerd")
	return d
}

// startSharedDocker starts the shared daemon once and builds the busybox
// image in it.
func startSharedDocker() (*dockertest.Daemon, error) {
	sharedDocker.once.Do(func() {
		d, err := dockertest.Start()
		if err != nil {
			sharedDocker.err = err
			return
		}
		sharedDocker.daemon = d
		sharedDocker.err = d.ImportBusybox(context.Background(), "hopper-test/busybox", "1",
			map[string]string{"etc/marker": "hello from the image\n"})
	})
	return sharedDocker.daemon, sharedDocker.err
}

// stopSharedDocker stops the private daemon if a test started it.
func stopSharedDocker() {
	if sharedDocker.daemon != nil {
		sharedDocker.daemon.Stop()
	}
}

// startDockerWorker starts `hopper worker --engine docker` for queue on
// the shared daemon, whose lack of a bridge network gives containers none
// unless o.config sets a "docker" object of its own. The worker's environment holds the root
// access token, which must never reach a container.
func startDockerWorker(t *testing.T, queue string, o workerOpts) *worker {
	t.Helper()
	d := needDocker(t)
	dir := t.TempDir()
	config := map[string]any{
		"engine": "docker",
		"docker": map[string]any{"host": d.Host},
	}
	for k, v := range o.config {
		config[k] = v
	}
	if dc, ok := config["docker"].(map[string]any); ok {
		dc["host"] = d.Host
	}
	o.config = config
	return launchWorker(t, dir, workerConfig(shared, queue, dir, o), "TASKCLUSTER_ACCESS_TOKEN="+shared.token)
}

// dockerPayload is a docker-worker payload running sh -c script in the
// busybox image; edit adds or changes fields.
func dockerPayload(script string, edit func(map[string]any)) map[string]any {
	pl := map[string]any{
		"image":      map[string]any{"type": "docker-image", "name": busyboxImage},
		"command":    []string{"sh", "-c", script},
		"maxRunTime": 60,
	}
	if edit != nil {
		edit(pl)
	}
	return pl
}

// containersOf lists the containers (running or not) labelled key=value.
func containersOf(t *testing.T, key, value string) []dockerapi.ContainerSummary {
	t.Helper()
	list, err := needDocker(t).Client.ListContainers(context.Background(), key, value)
	require.NoError(t, err)
	return list
}

// waitRunning waits until a container of the task's run runID runs.
func waitRunning(t *testing.T, taskID string, runID int) dockerapi.ContainerSummary {
	t.Helper()
	var found dockerapi.ContainerSummary
	require.Eventually(t, func() bool {
		for _, c := range containersOf(t, labelTask, taskID+"/"+strconv.Itoa(runID)) {
			if c.State == "running" {
				found = c
				return true
			}
		}
		return false
	}, 60*time.Second, 20*time.Millisecond, "no running container for task %s", taskID)
	return found
}

// waitResolved polls the task's status until its latest run is resolved.
func waitResolved(t *testing.T, taskID string, timeout time.Duration) *tcclient.TaskStatus {
	t.Helper()
	var st *tcclient.TaskStatus
	require.Eventually(t, func() bool {
		st = status(t, taskID)
		return len(st.Runs) > 0 && st.Runs[len(st.Runs)-1].ReasonResolved != ""
	}, timeout, 50*time.Millisecond, "task %s was not resolved", taskID)
	return st
}

// logOf returns the backing log of the latest run under its default name.
func logOf(t *testing.T, taskID string) string {
	t.Helper()
	return backingLog(t, taskID, -1)
}

// wallTimeRE finds the wall time in a command summary of the task log.
var wallTimeRE = regexp.MustCompile(`Wall Time: ([0-9.]+m?s)`)
