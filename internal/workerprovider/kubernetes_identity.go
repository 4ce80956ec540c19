package workerprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hopper-ci/hopper/internal/workermanager"
)

// ProofToken is the workerIdentityProof key a Pod's worker presents its
// projected service-account token under.
const ProofToken = "kubernetesToken"

// The extra fields the API server adds to a review of a token bound to a
// Pod.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// VerifyIdentity checks a registering worker's proof: a service-account
// token the cluster issued for hopper's audience, bound to the worker's own
// Pod (by name and UID), of the pool's service account in the pool's
// namespace. The cluster's TokenReview says whether the token is genuine
// and its Pod still exists, so a forged token, one issued for another
// audience or another Pod, or one whose Pod was deleted, is refused; a
// genuine token presented again after the worker registered is refused by
// the registration itself (once only).
//
// A Pod may start and register before the provisioner has recorded what
// the cluster answered its create (the Pod's UID): the Pod is then read
// from the cluster, and must be the one hopper made for this worker
// (its labels and annotations) with the UID the token is bound to. That
// UID is returned, recorded with the registration, so the worker is bound
// to that Pod from then on whoever records first.
func (k *Kubernetes) VerifyIdentity(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker, proof map[string]any) (json.RawMessage, error) {
	token, _ := proof[ProofToken].(string)
	if token == "" {
		return nil, fmt.Errorf("no %s in workerIdentityProof", ProofToken)
	}
	cfg, err := ParseKubernetesConfig(pool.Config)
	if err != nil {
		return nil, err
	}
	ref, err := workerPodRef(pool, w)
	if err != nil {
		return nil, err
	}
	client, err := k.Client()
	if err != nil {
		return nil, err
	}
	review, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{k.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, describeAPIError(err, "reviewing the worker's token")
	}
	st := review.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, fmt.Errorf("the cluster did not accept the token: %s", st.Error)
		}
		return nil, errors.New("the cluster did not accept the token")
	}
	if !slices.Contains(st.Audiences, k.Audience) {
		return nil, fmt.Errorf("the token is not for audience %s", k.Audience)
	}
	sa := cfg.Pod.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	if want := "system:serviceaccount:" + cfg.Namespace + ":" + sa; st.User.Username != want {
		return nil, fmt.Errorf("the token is %s's, not %s's", st.User.Username, want)
	}
	if got := st.User.Extra[extraPodName]; len(got) != 1 || got[0] != ref.Pod {
		return nil, fmt.Errorf("the token is not bound to the worker's Pod %s (bound to %v)", ref.Pod, []string(got))
	}
	uid := st.User.Extra[extraPodUID]
	if len(uid) != 1 || uid[0] == "" {
		return nil, fmt.Errorf("the token is bound to no Pod UID (%v)", []string(uid))
	}
	if ref.UID != "" {
		if uid[0] != ref.UID {
			return nil, fmt.Errorf("the token is bound to another Pod named %s (uid %s, not %s)", ref.Pod, uid[0], ref.UID)
		}
		return nil, nil
	}
	// The UID is not recorded yet: the cluster says which Pod is the
	// worker's.
	pod, err := client.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Pod, metav1.GetOptions{})
	if err != nil {
		return nil, describeAPIError(err, "reading the registering worker's Pod "+ref.Namespace+"/"+ref.Pod)
	}
	if !isWorkerPod(pod, w) || pod.Annotations[AnnotationAudience] != k.Audience {
		return nil, fmt.Errorf("the Pod %s/%s is not the one hopper made for worker %s", ref.Namespace, ref.Pod, w.Key())
	}
	if string(pod.UID) != uid[0] {
		return nil, fmt.Errorf("the token is bound to another Pod named %s (uid %s, not %s)", ref.Pod, uid[0], pod.UID)
	}
	data, err := json.Marshal(kubernetesData{Namespace: ref.Namespace, Pod: ref.Pod, UID: uid[0]})
	return data, err
}
