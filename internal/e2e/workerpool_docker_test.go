package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// hopperImage builds docs/worker-pools.md's image as the guide does: its
// block, run as written in a checkout of the repository, builds the
// static binary into rootfs/ and imports rootfs as hopper-worker:1 into
// the daemon. rootfs holds busybox beforehand: the tasks here use a shell,
// which the guide says the image then needs. (The checkout is the
// repository's top-level entries linked into a temporary directory, so
// that rootfs/ is not written into the tree under test; -trimpath, as the
// guide builds, keeps Go's build cache shared with other directories.)
func hopperImage(t *testing.T, d *dockertest.Daemon) string {
	t.Helper()
	checkout := t.TempDir()
	entries, err := os.ReadDir(e2e.RepoRoot())
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == "rootfs" {
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(e2e.RepoRoot(), e.Name()), filepath.Join(checkout, e.Name())))
	}
	base, err := dockertest.BusyboxRootfs(nil)
	require.NoError(t, err)
	rootfs := filepath.Join(checkout, "rootfs")
	require.NoError(t, os.Mkdir(rootfs, 0o755))
	untar := exec.Command("tar", "-x", "-C", rootfs)
	untar.Stdin = bytes.NewReader(base)
	out, err := untar.CombinedOutput()
	require.NoError(t, err, "unpacking busybox into rootfs: %s", out)
	shell, err := e2e.DocShell{Dir: checkout, Env: []string{"DOCKER_HOST=" + d.Host}, Timeout: 15 * time.Minute}.
		Run(t, e2e.DocExample(t, "worker-pools-image"))
	require.NoError(t, err, "docs/worker-pools.md's image block:\n%s", shell)
	return "hopper-worker:1"
}

// TestDockerPoolScales runs a docker pool on a private dockerd: a backlog
// makes the provisioner start containers running `hopper worker` from an
// image made of the static binary, up to maxCapacity and never past it;
// each registers with its one-time secret and works the backlog off; a
// killed container is reported as a pool error, its task retried, and
// replaced; once idle past queueInactivityTimeout the pool shrinks back to
// its minimum.
func TestDockerPoolScales(t *testing.T) {
	t.Parallel()
	if m := dockertest.Missing(); m != "" {
		t.Skip(m)
	}
	d, err := dockertest.Start()
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	image := hopperImage(t, d)

	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	const pool = "e2e-docker/builders"
	// The guide's pool, on the test's daemon, smaller and quicker to
	// shrink.
	doc := e2e.DocExample(t, "worker-pools-docker-pool").Replace(t,
		"maxCapacity: 8", "maxCapacity: 2",
		"    - {endpoint: unix:///var/run/docker.sock, maxContainers: 4}\n    - {endpoint: tcp://10.0.0.7:2375, maxContainers: 4}\n",
		"    - {endpoint: '"+d.Host+"', maxContainers: 4}\n",
		"image: hopper-worker:1 ", "image: "+image+" ",
		"registrationTimeout: 300", "registrationTimeout: 60",
		"queueInactivityTimeout: 1800", "queueInactivityTimeout: 12",
		"isolation: none}", "isolation: none, claimInterval: 200ms}")
	var def struct {
		ProviderID   string         `yaml:"providerId"`
		Description  string         `yaml:"description"`
		Owner        string         `yaml:"owner"`
		EmailOnError bool           `yaml:"emailOnError"`
		Config       map[string]any `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &def))
	raw, err := json.Marshal(def.Config)
	require.NoError(t, err)
	_, err = root.CreateWorkerPool(ctx, pool, &tcclient.WorkerPoolDefinition{ProviderID: def.ProviderID, Description: def.Description,
		Owner: def.Owner, EmailOnError: def.EmailOnError, Config: raw})
	require.NoError(t, err)

	// Watch the daemon: never more than maxCapacity containers of the pool.
	dc, err := workerprovider.NewDockerClient(d.Host)
	require.NoError(t, err)
	var most atomic.Int32
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		sample := time.NewTicker(50 * time.Millisecond)
		defer sample.Stop()
		for {
			if n, err := liveContainers(watch, dc, pool); err == nil && int32(n) > most.Load() {
				most.Store(int32(n))
			}
			select {
			case <-watch.Done():
				return
			case <-sample.C:
			}
		}
	}()

	created := time.Now()
	var ids []string
	for range 6 {
		ids = append(ids, createShellTask(t, ctx, root, pool, "sleep 2"))
	}
	firstStarted := waitForRun(t, ctx, root, ids[0], 0, "running", 2*time.Minute)
	t.Logf("pending task -> container started -> first claim: %s", firstStarted.Sub(created))
	for _, id := range ids[1:] {
		waitForRun(t, ctx, root, id, 0, "completed", 2*time.Minute)
	}
	require.LessOrEqual(t, most.Load(), int32(2), "never more containers than maxCapacity")
	require.Equal(t, int32(2), most.Load(), "the backlog grew the pool to its maximum")

	// Kill a worker's container while it runs a task.
	victim := createShellTask(t, ctx, root, pool, "sleep 60")
	waitForRun(t, ctx, root, victim, 0, "running", time.Minute)
	status, err := root.Status(ctx, victim)
	require.NoError(t, err)
	group, workerID := status.Runs[0].WorkerGroup, status.Runs[0].WorkerID
	w, err := root.GetPoolWorker(ctx, pool, group, workerID)
	require.NoError(t, err)
	require.Equal(t, "running", w.State)
	killed, err := dc.ContainerIDs(ctx, "hopper.worker", group+"/"+workerID)
	require.NoError(t, err)
	require.Len(t, killed, 1)
	require.NoError(t, dc.KillContainer(ctx, killed[0]))
	waitForRun(t, ctx, root, victim, 1, "running", time.Minute)
	status, err = root.Status(ctx, victim)
	require.NoError(t, err)
	require.Equal(t, "worker-shutdown", status.Runs[0].ReasonResolved)
	require.NotEqual(t, workerID, status.Runs[1].WorkerID, "another worker took the retry")
	errs, err := root.ListWorkerPoolErrors(ctx, pool, 10)
	require.NoError(t, err)
	found := false
	for _, e := range errs {
		found = found || e.Kind == "worker-died"
	}
	require.True(t, found, "the dead container is a pool error: %+v", errs)
	w, err = root.GetPoolWorker(ctx, pool, group, workerID)
	require.NoError(t, err)
	require.Equal(t, "stopped", w.State)
	_, err = root.CancelTask(ctx, victim)
	require.NoError(t, err)

	// Idle: back to the minimum (0) after queueInactivityTimeout.
	require.Eventually(t, func() bool {
		n, err := liveContainers(ctx, dc, pool)
		return err == nil && n == 0
	}, 2*time.Minute, 500*time.Millisecond, "the idle pool shrinks to its minimum")
	// The scanner records a stopped container's worker as stopped on its
	// next pass, a moment after the container is gone.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p, err := root.GetWorkerPool(ctx, pool)
		if assert.NoError(c, err) {
			assert.Equal(c, 0, p.RunningCount+p.RequestedCount, "no worker left in the pool's accounting")
		}
	}, time.Minute, 500*time.Millisecond)
	require.LessOrEqual(t, most.Load(), int32(2))
}

// createShellTask creates a task running command on the task queue.
func createShellTask(t testing.TB, ctx context.Context, c *tcclient.Client, taskQueueID, command string) string {
	t.Helper()
	id := tcclient.NewTaskID()
	payload, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", command}}, "maxRunTime": 120})
	require.NoError(t, err)
	now := time.Now()
	_, err = c.CreateTask(ctx, id, &tcclient.TaskDefinition{TaskQueueID: taskQueueID, Created: tcclient.NewTime(now),
		Deadline: tcclient.NewTime(now.Add(time.Hour)), Payload: payload,
		Metadata: tcclient.TaskMetadata{Name: "pool", Description: "pool e2e", Owner: "e2e@example.com", Source: "https://example.com/e2e"}})
	require.NoError(t, err)
	return id
}

// waitForRun waits until the task's run is in state and returns when it
// started (or now, for a run not started).
func waitForRun(t testing.TB, ctx context.Context, c *tcclient.Client, taskID string, runID int, state string, timeout time.Duration) time.Time {
	t.Helper()
	var st *tcclient.TaskStatus
	err := testclock.Poll(ctx, timeout, func() bool {
		var err error
		st, err = c.Status(ctx, taskID)
		require.NoError(t, err)
		return len(st.Runs) > runID && st.Runs[runID].State == state
	})
	if err != nil {
		t.Fatalf("task %s run %d is not %s: %v; runs: %+v", taskID, runID, state, err, st.Runs)
	}
	if s := st.Runs[runID].Started; !s.IsZero() {
		return s.Time
	}
	return time.Now()
}

// liveContainers counts the pool's containers a daemon holds a place for
// (made, running or restarting), as the provider counts them.
func liveContainers(ctx context.Context, dc *dockerapi.Client, pool string) (int, error) {
	list, err := dc.ListContainers(ctx, "hopper.worker-pool", pool)
	n := 0
	for _, c := range list {
		if c.State == "created" || c.State == "running" || c.State == "restarting" {
			n++
		}
	}
	return n, err
}
