package workerprovider_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// TestKubernetesProviderLogic runs where no control plane is built (CI):
// the provider's reading of Pod states and token reviews, against
// client-go's fake clientset. It is not the proof that the provider works
// with a cluster (TestKubernetesProvider and TestKubernetesIdentity are,
// on a real API server); it keeps the logic checked on every run.
func TestKubernetesProviderLogic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := fake.NewClientset()
	k := workerprovider.NewKubernetesForClient(client, testAudience)
	t.Cleanup(k.Close)
	pool := kubePool(t, "builds", map[string]any{"serviceAccountName": "ci"})
	w := requestedWorker(pool, "w-one")
	data, err := k.Start(ctx, pool, w, workerprovider.Registration{RootURL: "http://hopper"})
	require.NoError(t, err)
	w.ProviderData = data
	name := workerprovider.PodName(w.Key())
	pods := client.CoreV1().Pods("builds")

	setState := func(phase corev1.PodPhase, reason string, state corev1.ContainerState) {
		t.Helper()
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		p.Status = corev1.PodStatus{Phase: phase, Reason: reason, ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", State: state}}}
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name    string
		phase   corev1.PodPhase
		reason  string
		state   corev1.ContainerState
		want    workerprovider.Status
		detail  string
		running bool
	}{
		{"pending", corev1.PodPending, "", corev1.ContainerState{}, workerprovider.Status{Running: true}, "", true},
		{"running", corev1.PodRunning, "", corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, workerprovider.Status{Running: true}, "", true},
		{"image", corev1.PodPending, "", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}, workerprovider.Status{}, "cannot start: ImagePullBackOff: no such image", false},
		{"oom", corev1.PodFailed, "", corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}, workerprovider.Status{Exited: true, ExitCode: 137}, "out of memory", false},
		{"evicted", corev1.PodFailed, "Evicted", corev1.ContainerState{}, workerprovider.Status{}, "failed (Evicted)", false},
		{"clean exit", corev1.PodSucceeded, "", corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}, workerprovider.Status{Exited: true}, "exited with status 0", false},
	} {
		setState(tc.phase, tc.reason, tc.state)
		// Checks read the watch's cache, a moment behind.
		require.Eventually(t, func() bool {
			st, err := k.Check(ctx, pool, w)
			require.NoError(t, err, tc.name)
			return st.Running == tc.running && st.Exited == tc.want.Exited && st.ExitCode == tc.want.ExitCode &&
				strings.Contains(st.Detail, tc.detail)
		}, time.Minute, 10*time.Millisecond, tc.name)
	}

	// Token reviews: what the API server answers decides.
	review := authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{testAudience},
		User: authnv1.UserInfo{Username: "system:serviceaccount:builds:ci", Extra: map[string]authnv1.ExtraValue{
			"authentication.kubernetes.io/pod-name": {name}, "authentication.kubernetes.io/pod-uid": {"uid-1"}}}}
	client.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authnv1.TokenReview{Status: review}, nil
	})
	// The fake clientset gives Pods no UID: the Pod is given the one the
	// token is bound to, as the API server would have; Start recorded none.
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	p.UID = "uid-1"
	_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	proof := map[string]any{workerprovider.ProofToken: "a.b.c"}
	// Registering before the Pod's UID is recorded: the Pod read from the
	// cluster says which UID is the worker's, and that is what the
	// registration records.
	proven, err := k.VerifyIdentity(ctx, pool, w, proof)
	require.NoError(t, err)
	require.JSONEq(t, `{"namespace":"builds","pod":"`+name+`","uid":"uid-1"}`, string(proven))
	w.ProviderData = proven
	again, err := k.VerifyIdentity(ctx, pool, w, proof)
	require.NoError(t, err)
	require.Nil(t, again, "nothing new to record once the UID is")
	for _, tc := range []struct {
		name   string
		change func(s *authnv1.TokenReviewStatus)
	}{
		{"unauthenticated", func(s *authnv1.TokenReviewStatus) { s.Authenticated = false }},
		{"audience", func(s *authnv1.TokenReviewStatus) { s.Audiences = []string{"other"} }},
		{"account", func(s *authnv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:builds:default" }},
		{"pod", func(s *authnv1.TokenReviewStatus) {
			s.User.Extra = map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"someone-else"}}
		}},
		{"no pod", func(s *authnv1.TokenReviewStatus) { s.User.Extra = nil }},
		{"another pod of the name", func(s *authnv1.TokenReviewStatus) {
			s.User.Extra = map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {name}, "authentication.kubernetes.io/pod-uid": {"uid-2"}}
		}},
	} {
		saved := review
		tc.change(&review)
		for _, data := range []json.RawMessage{proven, nil} {
			w.ProviderData = data
			_, err := k.VerifyIdentity(ctx, pool, w, proof)
			require.Error(t, err, "%s (uid recorded: %v)", tc.name, data != nil)
		}
		w.ProviderData = proven
		review = saved
	}
	_, err = k.VerifyIdentity(ctx, pool, w, map[string]any{})
	require.Error(t, err, "no token")

	// Stop deletes the Pod; what is gone is no error.
	require.NoError(t, k.Stop(ctx, pool, w))
	_, err = pods.Get(ctx, name, metav1.GetOptions{})
	require.Error(t, err)
	require.NoError(t, k.Stop(ctx, pool, w))
	require.Eventually(t, func() bool {
		st, err := k.Check(ctx, pool, w)
		require.NoError(t, err)
		return !st.Running && strings.Contains(st.Detail, "is gone")
	}, time.Minute, 10*time.Millisecond)
}

// TestPodName: a worker's Pod name is a valid DNS label, the same for the
// same worker, different for another.
func TestPodName(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, k := range []workermanager.Key{
		{WorkerPoolID: "proj/linux", WorkerGroup: "kubernetes", WorkerID: "wAbC_d-1"},
		{WorkerPoolID: "proj/linux", WorkerGroup: "kubernetes", WorkerID: "wAbC_d-2"},
		{WorkerPoolID: "p/" + "Very_Long-Worker.Type.Name.With.Many.Parts.x", WorkerGroup: "g", WorkerID: "w"},
		{WorkerPoolID: "p/___", WorkerGroup: "g", WorkerID: "w"},
	} {
		name := workerprovider.PodName(k)
		require.Regexp(t, `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, name)
		require.LessOrEqual(t, len(name), 63)
		require.Equal(t, name, workerprovider.PodName(k))
		require.False(t, seen[name], name)
		seen[name] = true
	}
}
