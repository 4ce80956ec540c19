package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerprovider"
	"github.com/hopper-ci/hopper/internal/workerprovider/kubetest"
)

// hopperAccess applies the RBAC docs/worker-pools.md lists for hopper's
// service account (hopper/hopper), and returns a kubeconfig holding a token
// of that account, as hopper's own Pod would.
func hopperAccess(t testing.TB, c *kubetest.Cluster) string {
	t.Helper()
	c.Namespace(t, "hopper")
	c.ServiceAccount(t, "hopper", "hopper")
	c.Apply(t, e2e.DocExample(t, "worker-pools-k8s-rbac").Text)
	return c.ServiceAccountKubeconfig(t, "hopper", "hopper")
}

// poolPods counts the pool's Pods that are not being deleted.
func poolPods(ctx context.Context, c *kubetest.Cluster, namespace, pool string) ([]corev1.Pod, error) {
	list, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: workerprovider.LabelPool + "=" + workerprovider.PoolLabel(pool)})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
}

// kubePool is a hopper serving a kubernetes pool on a real control plane,
// with the node played by test code running each Pod's `hopper worker`.
type kubePool struct {
	c    *kubetest.Cluster
	srv  *e2e.Server
	root *tcclient.Client
	node *kubetest.Node
	ns   string
	pool string
}

// startKubePool starts the control plane, hopper (talking to the cluster
// as a service account holding only the RBAC docs/worker-pools.md lists)
// and the node, and declares the guide's pool with the given limits.
func startKubePool(t testing.TB, ctx context.Context, maxCapacity, inactivity int, serveArgs ...string) *kubePool {
	t.Helper()
	c := kubetest.Start(t)
	const ns, pool = "ci", "proj/k8s"
	c.Namespace(t, ns)
	c.ServiceAccount(t, ns, "ci-builder")
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: append([]string{"--kubeconfig", hopperAccess(t, c)}, serveArgs...)})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hopper serve logs:\n%s", srv.Logs())
		}
	})
	bin := e2e.Binary(t)
	workDirs := t.TempDir()
	var podsRun atomic.Int32
	node := c.StartNode(t, ns, kubetest.NodeOptions{Rewrite: func(cmd []string) []string {
		n := podsRun.Add(1)
		if cmd[0] == "/hopper" {
			cmd = append([]string{bin}, cmd[1:]...)
		}
		return append(cmd, "--work-dir", filepath.Join(workDirs, fmt.Sprintf("w%d", n)))
	}})
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	doc := e2e.DocExample(t, "worker-pools-k8s-pool").Replace(t,
		"maxCapacity: 10", fmt.Sprintf("maxCapacity: %d", maxCapacity),
		"registry.example.com/hopper-worker:1", "hopper-worker:e2e",
		"queueInactivityTimeout: 300", fmt.Sprintf("queueInactivityTimeout: %d", inactivity),
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
	return &kubePool{c: c, srv: srv, root: root, node: node, ns: ns, pool: pool}
}

// sampleMost records the most Pods the pool had at once until ctx ends.
func (k *kubePool) sampleMost(ctx context.Context) *atomic.Int32 {
	var most atomic.Int32
	go func() {
		sample := time.NewTicker(50 * time.Millisecond)
		defer sample.Stop()
		for {
			if pods, err := poolPods(ctx, k.c, k.ns, k.pool); err == nil && int32(len(pods)) > most.Load() {
				most.Store(int32(len(pods)))
			}
			select {
			case <-ctx.Done():
				return
			case <-sample.C:
			}
		}
	}()
	return &most
}

// TestKubernetesPoolScales runs a kubernetes pool on a real control plane
// (etcd and kube-apiserver; the node's part played by kubetest.Node, which
// runs each Pod's `hopper worker` as a local process with the token the
// kubelet would project): a backlog grows the pool to maxCapacity and
// never past it; each Pod's worker registers with its bound token, which
// hopper has the cluster review (a forged token, and the real one
// replayed, are refused); a Pod deleted under a running task has the run
// resolved worker-shutdown and retried on another Pod; idle, the pool
// returns to zero.
func TestKubernetesPoolScales(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k := startKubePool(t, ctx, 3, 10, "--worker-scan-interval", "2s")
	c, srv, root, ns, pool := k.c, k.srv, k.root, k.ns, k.pool
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	most := k.sampleMost(watch)

	created := time.Now()
	var ids []string
	for range 8 {
		ids = append(ids, createShellTask(t, ctx, root, pool, "sleep 2"))
	}
	firstStarted := waitForRun(t, ctx, root, ids[0], 0, "running", 2*time.Minute)
	t.Logf("pending task -> Pod -> first claim: %s", firstStarted.Sub(created))
	for _, id := range ids {
		waitForRun(t, ctx, root, id, 0, "completed", 2*time.Minute)
	}
	require.LessOrEqual(t, most.Load(), int32(3), "never more Pods than maxCapacity")
	require.Equal(t, int32(3), most.Load(), "the backlog grew the pool to its maximum")

	// A running worker: a forged token, and its own token presented again,
	// register nothing.
	victim := createShellTask(t, ctx, root, pool, "sleep 60")
	waitForRun(t, ctx, root, victim, 0, "running", time.Minute)
	status, err := root.Status(ctx, victim)
	require.NoError(t, err)
	group, workerID := status.Runs[0].WorkerGroup, status.Runs[0].WorkerID
	w, err := root.GetPoolWorker(ctx, pool, group, workerID)
	require.NoError(t, err)
	require.Equal(t, "running", w.State)
	podName := workerprovider.PodName(workermanager.Key{WorkerPoolID: pool, WorkerGroup: group, WorkerID: workerID})
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	require.NoError(t, err)
	realToken, err := c.Token(ctx, pod)
	require.NoError(t, err)
	anon := &tcclient.Client{RootURL: srv.RootURL}
	for name, tok := range map[string]string{
		"forged":   "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMifQ.AAAA",
		"replayed": realToken,
	} {
		_, err := anon.RegisterWorker(ctx, pool, "kubernetes", group, workerID, map[string]string{workerprovider.ProofToken: tok})
		require.Error(t, err, name)
		t.Logf("%s token: %v", name, err)
	}

	// Delete the Pod under its running task.
	deleted := time.Now()
	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, podName, metav1.DeleteOptions{}))
	waitForRun(t, ctx, root, victim, 1, "running", 2*time.Minute)
	t.Logf("Pod deleted -> run resolved worker-shutdown -> retried on another Pod: %s", time.Since(deleted))
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
	require.True(t, found, "the deleted Pod is a pool error: %+v", errs)
	_, err = root.CancelTask(ctx, victim)
	require.NoError(t, err)

	// Idle: back to zero.
	require.Eventually(t, func() bool {
		pods, err := poolPods(ctx, c, ns, pool)
		return err == nil && len(pods) == 0
	}, 2*time.Minute, 500*time.Millisecond, "the idle pool shrinks to zero")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p, err := root.GetWorkerPool(ctx, pool)
		if assert.NoError(c, err) {
			assert.Equal(c, 0, p.RunningCount+p.RequestedCount, "no worker left in the pool's accounting")
		}
	}, time.Minute, 500*time.Millisecond)
	require.LessOrEqual(t, most.Load(), int32(3))
}

// BenchmarkKubernetesBacklog: 100 pending tasks against a kubernetes
// pool of maxCapacity 10 (each task `true`): the time from the tasks'
// creation to the first claim (a Pod made, its worker registered), to the
// last task resolved, and until the idle pool is back to zero Pods; the
// most Pods seen at once (never above 10). Run with -benchtime=1x.
func BenchmarkKubernetesBacklog(b *testing.B) {
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		k := startKubePool(b, ctx, 10, 5)
		watch, stopWatch := context.WithCancel(ctx)
		most := k.sampleMost(watch)
		created := time.Now()
		ids := make([]string, 100)
		for i := range ids {
			ids[i] = createShellTask(b, ctx, k.root, k.pool, "true")
		}
		var first time.Time
		for _, id := range ids {
			if s := waitForRun(b, ctx, k.root, id, 0, "completed", 5*time.Minute); first.IsZero() || s.Before(first) {
				first = s
			}
		}
		drained := time.Since(created)
		require.Eventually(b, func() bool {
			pods, err := poolPods(ctx, k.c, k.ns, k.pool)
			return err == nil && len(pods) == 0
		}, 5*time.Minute, 100*time.Millisecond)
		zero := time.Since(created)
		stopWatch()
		if most.Load() > 10 {
			b.Fatalf("%d Pods at once, above maxCapacity 10", most.Load())
		}
		b.ReportMetric(first.Sub(created).Seconds(), "s-to-first-claim")
		b.ReportMetric(drained.Seconds(), "s-to-drain-100")
		b.ReportMetric(zero.Seconds(), "s-back-to-zero")
		b.ReportMetric(float64(most.Load()), "most-pods")
		cancel()
	}
}

// TestKubernetesPoolReplicas: two hopper replicas on one PostgreSQL both
// run the provisioner against the same cluster; a backlog grows the pool
// to maxCapacity and never past it. The provisioners never tick (an hour
// apart): b, started first, holds the lease, and the tasks are created
// through a, so only a wake-up crossing from a to b (PostgreSQL's NOTIFY)
// provisions them. Then a replica is restarted while the Pods work: the
// new process adopts what the database and the cluster hold, and creates
// no Pod more.
func TestKubernetesPoolReplicas(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns, pool = "ci", "e2e-kube/replicas"
	c.Namespace(t, ns)
	kubeconfig := hopperAccess(t, c)
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	// The workers reach the replicas at one root URL, b's (one address
	// behind a load balancer in production); both replicas name it.
	b := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--db", db, "--kubeconfig", kubeconfig, "--provision-interval", "1h"}, Env: env})
	replicaArgs := []string{"--db", db, "--kubeconfig", kubeconfig, "--provision-interval", "1h", "--root-url", b.RootURL}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: replicaArgs, Env: env})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica a:\n%s\nreplica b:\n%s", a.Logs(), b.Logs())
		}
	})
	bin := e2e.Binary(t)
	workDirs := t.TempDir()
	var podsRun atomic.Int32
	c.StartNode(t, ns, kubetest.NodeOptions{Rewrite: func(cmd []string) []string {
		n := podsRun.Add(1)
		return append(append([]string{bin}, cmd[1:]...), "--work-dir", filepath.Join(workDirs, fmt.Sprintf("w%d", n)))
	}})
	// Everything is asked of a, which does not hold the provisioner's
	// lease (b took it on its first pass; if the lease has lapsed since,
	// a's own wake-up takes it and the test proves less).
	root := rootClient(a)
	raw, err := json.Marshal(map[string]any{
		"minCapacity": 0, "maxCapacity": 3, "namespace": ns,
		"pod":          map[string]any{"image": "hopper-worker:e2e", "hostNetwork": true},
		"lifecycle":    map[string]any{"registrationTimeout": 60, "queueInactivityTimeout": 60},
		"workerConfig": map[string]any{"hopperWorker": map[string]any{"claimInterval": "200ms", "isolation": "none"}},
	})
	require.NoError(t, err)
	_, err = root.CreateWorkerPool(ctx, pool, &tcclient.WorkerPoolDefinition{ProviderID: "kubernetes", Description: "Pods",
		Owner: "ops@example.com", Config: raw})
	require.NoError(t, err)
	k := &kubePool{c: c, ns: ns, pool: pool}
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	most := k.sampleMost(watch)

	created := time.Now()
	var ids []string
	for range 6 {
		ids = append(ids, createShellTask(t, ctx, root, pool, "sleep 1"))
	}
	first := waitForRun(t, ctx, root, ids[0], 0, "running", 2*time.Minute)
	t.Logf("task created on a -> b's provisioner woken -> Pod -> first claim: %s", first.Sub(created))
	for _, id := range ids {
		waitForRun(t, ctx, root, id, 0, "completed", 2*time.Minute)
	}
	require.Equal(t, int32(3), most.Load(), "the backlog grew the pool to its maximum, and not past it")

	// Restart b, the provisioner, while three Pods work: on the same
	// address (the workers' root URL), now provisioning every second.
	ids = nil
	for range 3 {
		ids = append(ids, createShellTask(t, ctx, root, pool, "sleep 8"))
	}
	for _, id := range ids {
		waitForRun(t, ctx, root, id, 0, "running", time.Minute)
	}
	before, err := poolPods(ctx, c, ns, pool)
	require.NoError(t, err)
	b.Stop()
	e2e.StartServer(t, e2e.ServerOptions{Listen: strings.TrimPrefix(b.RootURL, "http://"),
		Args: []string{"--db", db, "--kubeconfig", kubeconfig, "--provision-interval", "1s"}, Env: env})
	for _, id := range ids {
		waitForRun(t, ctx, root, id, 0, "completed", 2*time.Minute)
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
	require.Equal(t, int32(3), most.Load(), "never more than maxCapacity Pods")
}
