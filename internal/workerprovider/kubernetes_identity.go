package workerprovider

import (
	"context"
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
// Pod (by name and, once recorded, UID), of the pool's service account in
// the pool's namespace. The cluster's TokenReview says whether the token is
// genuine and its Pod still exists, so a forged token, one issued for
// another audience or another Pod, or one whose Pod was deleted, is
// refused; a genuine token presented again after the worker registered is
// refused by the registration itself (once only).
func (k *Kubernetes) VerifyIdentity(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker, proof map[string]any) error {
	token, _ := proof[ProofToken].(string)
	if token == "" {
		return fmt.Errorf("no %s in workerIdentityProof", ProofToken)
	}
	cfg, err := ParseKubernetesConfig(pool.Config)
	if err != nil {
		return err
	}
	ref, err := workerPodRef(pool, w)
	if err != nil {
		return err
	}
	client, err := k.Client()
	if err != nil {
		return err
	}
	review, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{k.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return describeAPIError(err, "reviewing the worker's token")
	}
	st := review.Status
	if !st.Authenticated {
		if st.Error != "" {
			return fmt.Errorf("the cluster did not accept the token: %s", st.Error)
		}
		return errors.New("the cluster did not accept the token")
	}
	if !slices.Contains(st.Audiences, k.Audience) {
		return fmt.Errorf("the token is not for audience %s", k.Audience)
	}
	sa := cfg.Pod.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	if want := "system:serviceaccount:" + cfg.Namespace + ":" + sa; st.User.Username != want {
		return fmt.Errorf("the token is %s's, not %s's", st.User.Username, want)
	}
	if got := st.User.Extra[extraPodName]; len(got) != 1 || got[0] != ref.Pod {
		return fmt.Errorf("the token is not bound to the worker's Pod %s (bound to %v)", ref.Pod, []string(got))
	}
	if ref.UID != "" {
		if got := st.User.Extra[extraPodUID]; len(got) != 1 || got[0] != ref.UID {
			return fmt.Errorf("the token is bound to another Pod named %s (uid %v, not %s)", ref.Pod, []string(got), ref.UID)
		}
	}
	return nil
}
