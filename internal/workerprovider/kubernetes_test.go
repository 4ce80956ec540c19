package workerprovider_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerprovider"
	"github.com/hopper-ci/hopper/internal/workerprovider/kubetest"
)

const testAudience = "https://hopper.example.com"

func kubePool(t testing.TB, namespace string, pod map[string]any) *workermanager.Pool {
	t.Helper()
	if pod == nil {
		pod = map[string]any{}
	}
	if _, ok := pod["image"]; !ok {
		pod["image"] = "hopper-worker:test"
	}
	raw, err := json.Marshal(map[string]any{"minCapacity": 0, "maxCapacity": 4, "namespace": namespace, "pod": pod})
	require.NoError(t, err)
	return &workermanager.Pool{WorkerPoolID: "prov/kube", ProviderID: "kubernetes", Config: raw}
}

func requestedWorker(pool *workermanager.Pool, id string) *workermanager.Worker {
	return workermanager.NewRequestedWorker(pool, pool.ProviderID, id, 1, time.Now())
}

// started starts a worker's Pod and records what Start returned, as the
// provisioner does.
func started(t *testing.T, ctx context.Context, k *workerprovider.Kubernetes, pool *workermanager.Pool, w *workermanager.Worker) *corev1.Pod {
	t.Helper()
	data, err := k.Start(ctx, pool, w, workerprovider.Registration{RootURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	w.ProviderData = data
	client, err := k.Client()
	require.NoError(t, err)
	var cfg struct{ Namespace string }
	require.NoError(t, json.Unmarshal(pool.Config, &cfg))
	p, err := client.CoreV1().Pods(cfg.Namespace).Get(ctx, workerprovider.PodName(w.Key()), metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

// TestKubernetesProvider drives the provider against a real API server:
// the Pod carries the worker's identity and a projected token, never a
// secret; what the node reports (running, OOM-killed, evicted, an image
// it cannot pull, a clean exit) is what Check says; a Pod deleted behind
// hopper's back is gone; a second Start of the same worker adopts its Pod;
// Stop deletes it; the watch wakes the scanner and deletes Pods outside
// the accounting.
func TestKubernetesProvider(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.Namespace(t, "builds")
	node := c.StartNode(t, "builds", kubetest.NodeOptions{Run: func(*corev1.Pod) bool { return false }})
	var wakes atomic.Int32
	k := workerprovider.NewKubernetesForClient(c.Client, testAudience)
	k.Wake = func() { wakes.Add(1) }
	k.Accounted = func(_ context.Context, key workermanager.Key) (bool, error) {
		return !strings.HasPrefix(key.WorkerID, "orphan"), nil
	}
	t.Cleanup(k.Close)
	pool := kubePool(t, "builds", map[string]any{"command": []string{"/hopper", "worker"}, "env": map[string]string{"EXTRA": "1"},
		"resources":    map[string]any{"requests": map[string]string{"cpu": "100m", "memory": "64Mi"}, "limits": map[string]string{"memory": "256Mi"}},
		"nodeSelector": map[string]string{"pool": "ci"}, "labels": map[string]string{"team": "infra"},
		"tolerations": []map[string]any{{"key": "ci", "operator": "Exists", "effect": "NoSchedule"}}})

	w := requestedWorker(pool, "w-one")
	p := started(t, ctx, k, pool, w)
	require.Equal(t, "hopper", p.Labels[workerprovider.LabelManagedBy])
	require.Equal(t, workerprovider.PoolLabel("prov/kube"), p.Labels[workerprovider.LabelPool])
	require.Equal(t, "infra", p.Labels["team"])
	require.Equal(t, "w-one", p.Annotations[workerprovider.AnnotationWorkerID])
	require.Equal(t, corev1.RestartPolicyNever, p.Spec.RestartPolicy)
	require.Equal(t, "ci", p.Spec.NodeSelector["pool"])
	require.Equal(t, "ci", p.Spec.Tolerations[0].Key, "the template's toleration (admission adds its own after it)")
	require.Equal(t, "256Mi", p.Spec.Containers[0].Resources.Limits.Memory().String())
	env := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = e.Value
		require.Nil(t, e.ValueFrom, "nothing is read from a Secret")
		require.NotContains(t, strings.ToLower(e.Name), "secret")
	}
	require.Equal(t, "w-one", env[workerprovider.EnvWorkerID])
	require.Equal(t, "prov/kube", env[workerprovider.EnvWorkerPool])
	require.Equal(t, "1", env["EXTRA"])
	require.NotEmpty(t, env[workerprovider.EnvIdentityTokenFile])
	require.Len(t, p.Spec.Volumes, 1)
	proj := p.Spec.Volumes[0].Projected
	require.NotNil(t, proj)
	require.Equal(t, testAudience, proj.Sources[0].ServiceAccountToken.Audience)
	require.False(t, *p.Spec.AutomountServiceAccountToken, "the worker gets no token for the cluster's API")

	st, err := k.Check(ctx, pool, w)
	require.NoError(t, err)
	require.True(t, st.Running, "a Pending Pod is starting")

	// A second Start of the same worker (a replica that lost its lease
	// mid-call, a crash before the record) adopts the Pod.
	again, err := k.Start(ctx, pool, w, workerprovider.Registration{RootURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.JSONEq(t, string(w.ProviderData), string(again))

	// What the node reports.
	for _, tc := range []struct {
		name    string
		report  func(pod string) error
		running bool
		exited  bool
		detail  string
	}{
		{"image", func(pod string) error { return node.SetWaiting(ctx, pod, "ErrImagePull", "pull access denied") }, false, false, "ErrImagePull: pull access denied"},
		{"oom", func(pod string) error { return node.OOMKill(ctx, pod) }, false, true, "OOMKilled"},
		{"evicted", func(pod string) error { return node.Evict(ctx, pod) }, false, false, "(Evicted): The node was low on resource"},
	} {
		w := requestedWorker(pool, "w-"+tc.name)
		p := started(t, ctx, k, pool, w)
		require.NoError(t, tc.report(p.Name), tc.name)
		require.Eventually(t, func() bool {
			st, err := k.Check(ctx, pool, w)
			require.NoError(t, err)
			return !st.Running && st.Exited == tc.exited && strings.Contains(st.Detail, tc.detail)
		}, time.Minute, 20*time.Millisecond, tc.name)
	}

	// Deleted behind hopper's back: gone, and the watch wakes the scanner.
	before := wakes.Load()
	require.NoError(t, c.Client.CoreV1().Pods("builds").Delete(ctx, p.Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		st, err := k.Check(ctx, pool, w)
		require.NoError(t, err)
		return !st.Running && strings.Contains(st.Detail, "is gone")
	}, time.Minute, 20*time.Millisecond)
	require.Eventually(t, func() bool { return wakes.Load() > before }, time.Minute, 20*time.Millisecond)

	// Stop deletes; stopping what is gone is no error.
	w2 := requestedWorker(pool, "w-two")
	p2 := started(t, ctx, k, pool, w2)
	require.NoError(t, k.Stop(ctx, pool, w2))
	_, err = c.Client.CoreV1().Pods("builds").Get(ctx, p2.Name, metav1.GetOptions{})
	require.True(t, isNotFound(err), "%v", err)
	require.NoError(t, k.Stop(ctx, pool, w2))

	// A Pod of this hopper whose worker is out of the accounting is
	// deleted when the watch sees it.
	orphan := requestedWorker(pool, "orphan-1")
	p3 := started(t, ctx, k, pool, orphan)
	require.Eventually(t, func() bool {
		_, err := c.Client.CoreV1().Pods("builds").Get(ctx, p3.Name, metav1.GetOptions{})
		return isNotFound(err)
	}, time.Minute, 20*time.Millisecond)
}

func isNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not found")
}

// TestKubernetesIdentity checks registration proofs through the cluster's
// TokenReview: the token the kubelet projects into the worker's own Pod
// passes; a forged or tampered one, one for another audience, one bound
// to another Pod, and one whose Pod was deleted do not. (A token of another
// service account bound to the Pod the cluster does not issue.)
func TestKubernetesIdentity(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.Namespace(t, "builds")
	c.ServiceAccount(t, "builds", "ci-worker")
	k := workerprovider.NewKubernetesForClient(c.Client, testAudience)
	t.Cleanup(k.Close)
	pool := kubePool(t, "builds", map[string]any{"serviceAccountName": "ci-worker"})

	w := requestedWorker(pool, "w-a")
	pa := started(t, ctx, k, pool, w)
	other := requestedWorker(pool, "w-b")
	pb := started(t, ctx, k, pool, other)
	token := func(p *corev1.Pod) string {
		tok, err := c.Token(ctx, p)
		require.NoError(t, err)
		return tok
	}
	proof := func(tok string) map[string]any { return map[string]any{workerprovider.ProofToken: tok} }

	good := token(pa)
	_, err := k.VerifyIdentity(ctx, pool, w, proof(good))
	require.NoError(t, err)

	// A Pod registering before the provisioner recorded its UID: the token
	// passes, and the UID the cluster bound it to is what is recorded.
	early := requestedWorker(pool, "w-early")
	_, err = k.Start(ctx, pool, early, workerprovider.Registration{RootURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	earlyPod, err := c.Client.CoreV1().Pods("builds").Get(ctx, workerprovider.PodName(early.Key()), metav1.GetOptions{})
	require.NoError(t, err)
	proven, err := k.VerifyIdentity(ctx, pool, early, proof(token(earlyPod)))
	require.NoError(t, err)
	require.Contains(t, string(proven), string(earlyPod.UID))
	_, err = k.VerifyIdentity(ctx, pool, early, proof(token(pb)))
	require.Error(t, err, "another Pod's token, the UID not recorded")

	wrongAudience := *pa
	wrongAudience.Spec.Volumes = []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "https://elsewhere.example.com", Path: "t"}}}}}}}
	parts := strings.Split(good, ".")
	require.Len(t, parts, 3)
	for _, tc := range []struct {
		name, token string
	}{
		{"none", ""},
		{"forged", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YnVpbGRzOmNpLXdvcmtlciJ9.c2lnbmF0dXJl"},
		{"tampered", parts[0] + "." + parts[1] + "x." + parts[2]},
		{"audience", token(&wrongAudience)},
		{"other pod", token(pb)},
	} {
		_, err := k.VerifyIdentity(ctx, pool, w, proof(tc.token))
		require.Error(t, err, tc.name)
		t.Logf("%s: %v", tc.name, err)
		require.NotContains(t, err.Error(), good, "the token is never echoed")
	}

	// Once its Pod is gone the token is worth nothing, even to the worker
	// it was bound to.
	require.NoError(t, c.Client.CoreV1().Pods("builds").Delete(ctx, pa.Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := k.VerifyIdentity(ctx, pool, w, proof(good))
		return err != nil
	}, time.Minute, 50*time.Millisecond)
}

// TestKubernetesBadInput: what the cluster refuses is an error saying
// why, and no Pod is left behind.
func TestKubernetesBadInput(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.Namespace(t, "builds")
	c.Namespace(t, "elsewhere")
	// hopper's own account may manage Pods in "builds" only.
	_, err := c.Client.RbacV1().Roles("builds").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "hopper"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.RbacV1().RoleBindings("builds").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "hopper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "hopper"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "hopper"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	limited := workerprovider.NewKubernetes(c.Kubeconfig(t, "hopper"), testAudience)
	t.Cleanup(limited.Close)

	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: gone, user: u}}]
current-context: c
`), 0o600))
	gone := workerprovider.NewKubernetes(unreachable, testAudience)
	t.Cleanup(gone.Close)
	noCluster := workerprovider.NewKubernetes("", testAudience)

	for _, tc := range []struct {
		name string
		k    *workerprovider.Kubernetes
		pool *workermanager.Pool
		want string
	}{
		{"rejected template", limited, kubePool(t, "builds", map[string]any{"image": " hopper-worker:test"}), "refused the Pod template"},
		{"requests above limits", limited, kubePool(t, "builds", map[string]any{"resources": map[string]any{
			"requests": map[string]string{"memory": "1Gi"}, "limits": map[string]string{"memory": "1Mi"}}}), "refused the Pod template"},
		{"no RBAC in the namespace", limited, kubePool(t, "elsewhere", nil), "may not do this"},
		{"no namespace", workerprovider.NewKubernetesForClient(c.Client, testAudience), kubePool(t, "missing", nil), "does the namespace exist"},
		{"unreachable", gone, kubePool(t, "builds", nil), "cannot be reached"},
		{"no cluster", noCluster, kubePool(t, "builds", nil), "no cluster"},
	} {
		w := requestedWorker(tc.pool, "w-"+strings.ReplaceAll(tc.name, " ", "-"))
		_, err := tc.k.Start(ctx, tc.pool, w, workerprovider.Registration{RootURL: "http://127.0.0.1:1"})
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
		t.Logf("%s: %v", tc.name, err)
	}
	for _, ns := range []string{"builds", "elsewhere"} {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, pods.Items, "no Pod left in %s", ns)
	}
}
