package e2e_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerprovider"
	"github.com/hopper-ci/hopper/internal/workerprovider/kubetest"
)

// TestKubeletPool runs a kubernetes pool end to end on a real node:
// kube-scheduler, kube-controller-manager and a kubelet running the Pods
// through containerd and runc, each Pod's container `hopper worker` from
// an image of the static binary (imported without a registry), its token
// projected by the kubelet. Two hopper replicas share one PostgreSQL; the
// provisioners never tick (an hour apart), so the tasks, created on the
// replica without the lease, are provisioned for through the other's
// wake-up. A backlog grows the pool to maxCapacity and never past it; a
// Pod deleted under its task has the run resolved worker-shutdown and
// the task retried on another Pod; the provisioner's replica restarted
// while Pods work starts no Pod more; idle, the pool returns to zero.
func TestKubeletPool(t *testing.T) {
	c := kubetest.StartWithNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	require.NoError(t, c.ImportImage("docker.io/library/hopper-worker:e2e", hopperRootfs(t), []string{"/hopper"}))
	const ns, pool = "ci", "e2e-kube/kubelet"
	c.Namespace(t, ns)
	c.ServiceAccount(t, ns, "ci-builder")
	kubeconfig := hopperAccess(t, c)
	db := e2e.FreshPostgres(t)
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	b := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--db", db, "--kubeconfig", kubeconfig, "--provision-interval", "1h",
		"--worker-scan-interval", "2s"}, Env: env})
	a := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--db", db, "--kubeconfig", kubeconfig, "--provision-interval", "1h",
		"--worker-scan-interval", "2s", "--root-url", b.RootURL}, Env: env})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica a:\n%s\nreplica b:\n%s", a.Logs(), b.Logs())
		}
	})
	root := rootClient(a)
	grace := 5
	raw, err := json.Marshal(map[string]any{
		"minCapacity": 0, "maxCapacity": 3, "namespace": ns,
		"pod": map[string]any{"image": "hopper-worker:e2e", "imagePullPolicy": "Never", "hostNetwork": true,
			"serviceAccountName": "ci-builder", "terminationGracePeriodSeconds": grace},
		"lifecycle":    map[string]any{"registrationTimeout": 120, "queueInactivityTimeout": 20},
		"workerConfig": map[string]any{"hopperWorker": map[string]any{"claimInterval": "200ms", "isolation": "none"}},
	})
	require.NoError(t, err)
	_, err = root.CreateWorkerPool(ctx, pool, &tcclient.WorkerPoolDefinition{ProviderID: "kubernetes", Description: "Pods on a kubelet",
		Owner: "ops@example.com", Config: raw})
	require.NoError(t, err)
	k := &kubePool{c: c, ns: ns, pool: pool}
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	most := k.sampleMost(watch)

	// A backlog: up to maxCapacity Pods, never more.
	created := time.Now()
	var ids []string
	for range 6 {
		ids = append(ids, createShellTask(t, ctx, root, pool, "sleep 2"))
	}
	first := waitForRun(t, ctx, root, ids[0], 0, "running", 5*time.Minute)
	t.Logf("pending task -> Pod scheduled, started by the kubelet -> registered -> first claim: %s", first.Sub(created))
	for _, id := range ids {
		waitForRun(t, ctx, root, id, 0, "completed", 5*time.Minute)
	}
	require.Equal(t, int32(3), most.Load(), "the backlog grew the pool to its maximum, and not past it")

	// A Pod deleted under its running task.
	victim := createShellTask(t, ctx, root, pool, "sleep 120")
	waitForRun(t, ctx, root, victim, 0, "running", 2*time.Minute)
	status, err := root.Status(ctx, victim)
	require.NoError(t, err)
	workerID := status.Runs[0].WorkerID
	podName := workerprovider.PodName(workermanager.Key{WorkerPoolID: pool, WorkerGroup: status.Runs[0].WorkerGroup, WorkerID: workerID})
	deleted := time.Now()
	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, podName, metav1.DeleteOptions{}))
	waitForRun(t, ctx, root, victim, 1, "running", 3*time.Minute)
	t.Logf("Pod deleted -> run resolved worker-shutdown -> retried on another Pod: %s", time.Since(deleted))
	status, err = root.Status(ctx, victim)
	require.NoError(t, err)
	require.Equal(t, "worker-shutdown", status.Runs[0].ReasonResolved)
	require.NotEqual(t, workerID, status.Runs[1].WorkerID, "another worker took the retry")
	_, err = root.CancelTask(ctx, victim)
	require.NoError(t, err)

	// The provisioner's replica restarted while Pods work: no Pod more.
	ids = nil
	for range 3 {
		ids = append(ids, createShellTask(t, ctx, root, pool, "sleep 10"))
	}
	for _, id := range ids {
		waitForRun(t, ctx, root, id, 0, "running", 3*time.Minute)
	}
	before, err := poolPods(ctx, c, ns, pool)
	require.NoError(t, err)
	b.Stop()
	e2e.StartServer(t, e2e.ServerOptions{Listen: strings.TrimPrefix(b.RootURL, "http://"),
		Args: []string{"--db", db, "--kubeconfig", kubeconfig, "--provision-interval", "1s", "--worker-scan-interval", "2s"}, Env: env})
	for _, id := range ids {
		waitForRun(t, ctx, root, id, 0, "completed", 3*time.Minute)
	}
	after, err := poolPods(ctx, c, ns, pool)
	require.NoError(t, err)
	names := func(pods []corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	require.ElementsMatch(t, names(before), names(after), "the restarted replica started no Pod")

	// Idle: back to zero Pods, and nothing left in the pool's accounting.
	require.NoError(t, testclock.Poll(ctx, 5*time.Minute, func() bool {
		pods, err := poolPods(ctx, c, ns, pool)
		return err == nil && len(pods) == 0
	}), "the idle pool shrinks to zero Pods")
	require.NoError(t, testclock.Poll(ctx, time.Minute, func() bool {
		p, err := root.GetWorkerPool(ctx, pool)
		return err == nil && p.RunningCount+p.RequestedCount == 0
	}), "no worker left in the pool's accounting")
	require.LessOrEqual(t, most.Load(), int32(3), "never more Pods than maxCapacity")
}

// hopperRootfs is a root file system, as a tar archive, of busybox (the
// tasks' shell) and a static hopper binary at /hopper: a worker image's
// one layer.
func hopperRootfs(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hopper")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/hopper")
	build.Dir = e2e.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building a static hopper: %s", out)
	base, err := dockertest.BusyboxRootfs(nil)
	require.NoError(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tr := tar.NewReader(bytes.NewReader(base))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.NoError(t, tw.WriteHeader(h))
		_, err = io.Copy(tw, tr)
		require.NoError(t, err)
	}
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "hopper", Mode: 0o755, Size: int64(len(data)), ModTime: time.Now()}))
	_, err = tw.Write(data)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	return buf.Bytes()
}
