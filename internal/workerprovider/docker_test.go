package workerprovider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

func dockerPool(t *testing.T, endpoint, image string, maxContainers int) *workermanager.Pool {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{"minCapacity": 0, "maxCapacity": 4, "image": image,
		"command": []string{"sleep", "30"}, "network": "none",
		"hosts": []map[string]any{{"endpoint": endpoint, "maxContainers": maxContainers}}})
	require.NoError(t, err)
	return &workermanager.Pool{WorkerPoolID: "prov/docker", ProviderID: "docker", Config: cfg}
}

// TestDockerProvider drives the provider against a private dockerd: a
// container starts with the worker's identity, is seen running, then
// exited when killed, then gone once stopped; a host at its
// maxContainers takes no more; a missing image and an unreachable daemon
// are errors, never a container left behind.
func TestDockerProvider(t *testing.T) {
	t.Parallel()
	if m := dockertest.Missing(); m != "" {
		t.Skip(m)
	}
	d, err := dockertest.Start()
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, d.ImportBusybox(ctx, "busybox", "e2e", nil))
	p := &workerprovider.Docker{}
	now := time.Now()
	pool := dockerPool(t, d.Host, "busybox:e2e", 1)
	worker := func(id string) *workermanager.Worker {
		return workermanager.NewRequestedWorker(pool, "docker", id, 1, now)
	}

	w := worker("w1")
	data, err := p.Start(ctx, pool, w, workerprovider.Registration{RootURL: "http://127.0.0.1:1", StaticSecret: "s"})
	require.NoError(t, err)
	w.ProviderData = data
	st, err := p.Check(ctx, pool, w)
	require.NoError(t, err)
	require.True(t, st.Running, "%+v", st)

	_, err = p.Start(ctx, pool, worker("w2"), workerprovider.Registration{})
	require.ErrorIs(t, err, workerprovider.ErrNoRoom, "the host is at its maxContainers")

	dc, err := workerprovider.NewDockerClient(d.Host)
	require.NoError(t, err)
	ids, err := dc.ContainerIDs(ctx, "hopper.worker", "docker/w1")
	require.NoError(t, err)
	require.Len(t, ids, 1)
	require.NoError(t, dc.KillContainer(ctx, ids[0]))
	require.Eventually(t, func() bool {
		st, err = p.Check(ctx, pool, w)
		return err == nil && !st.Running
	}, 30*time.Second, 100*time.Millisecond)
	require.True(t, st.Exited)
	require.Equal(t, 137, st.ExitCode)
	require.Contains(t, st.Detail, "exited with status 137")

	require.NoError(t, p.Stop(ctx, pool, w))
	require.NoError(t, p.Stop(ctx, pool, w), "stopping a gone worker is no error")
	st, err = p.Check(ctx, pool, w)
	require.NoError(t, err)
	require.False(t, st.Running || st.Exited)
	require.Contains(t, st.Detail, "gone")

	missing := dockerPool(t, d.Host, "no-such-image:1", 0)
	_, err = p.Start(ctx, missing, worker("w3"), workerprovider.Registration{})
	require.ErrorContains(t, err, "No such image")
	ids, err = dc.ContainerIDs(ctx, "hopper.worker", "docker/w3")
	require.NoError(t, err)
	require.Empty(t, ids, "nothing left behind")

	unreachable := dockerPool(t, fmt.Sprintf("unix://%s/none.sock", t.TempDir()), "busybox:e2e", 0)
	_, err = p.Start(ctx, unreachable, worker("w4"), workerprovider.Registration{})
	require.Error(t, err)
}
