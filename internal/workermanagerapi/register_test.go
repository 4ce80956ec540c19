package workermanagerapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workermanagerapi"
)

// podVerifier accepts the proof "pod-token", as a cluster would a token
// bound to the worker's Pod, and says which Pod that is.
type podVerifier struct{}

func (podVerifier) VerifyIdentity(_ context.Context, _ *workermanager.Pool, _ *workermanager.Worker, proof map[string]any) (json.RawMessage, error) {
	if proof["kubernetesToken"] != "pod-token" {
		return nil, errors.New("not the Pod's token")
	}
	return json.RawMessage(`{"namespace":"ci","pod":"hopper-p","uid":"uid-1"}`), nil
}

// TestRegisterBeforeStartRecorded: a worker whose Pod registers before
// the provisioner has recorded what the cluster answered its create is
// accepted, counted once (running, no longer requested), and bound to
// the Pod its proof names; the provisioner's record written afterwards
// changes no count; a forged proof, and the good one replayed, register
// nothing.
func TestRegisterBeforeStartRecorded(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		return workermanagerapi.Routes(workermanagerapi.Deps{Store: s.Store, Queue: s.Store, Issuer: rootIssuer{},
			Providers: []workermanagerapi.Provider{{ID: "kubernetes", Type: workermanager.ProviderTypeKubernetes, Verifier: podVerifier{}}},
			Logger:    s.Logger, Version: "test"})
	}})
	ctx := context.Background()
	now := time.Now()
	pool := &workermanager.Pool{WorkerPoolID: "proj/pods", ProviderID: "kubernetes", Description: "Pods", Owner: "ops@example.com",
		Config:  json.RawMessage(`{"minCapacity":0,"maxCapacity":2,"namespace":"ci","pod":{"image":"hopper-worker:1"}}`),
		Created: now, LastModified: now}
	require.NoError(t, s.Store.CreateWorkerPool(ctx, pool))
	ok, err := s.Store.TakeLease(ctx, store.TakeLeaseParams{Name: "provisioner", Holder: "test", Now: now, Until: now.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, ok)
	w := workermanager.NewRequestedWorker(pool, "kubernetes", "w-early", 1, now)
	require.NoError(t, s.Store.RequestPoolWorker(ctx, store.RequestPoolWorkerParams{Worker: w, Lease: "provisioner", Holder: "test", Now: now}))

	register := func(token string) (int, string) {
		status, raw := s.Call(t, nil, nil, http.MethodPost, workermanagerapi.BasePath+"/worker/register", map[string]any{
			"workerPoolId": "proj/pods", "providerId": "kubernetes", "workerGroup": "kubernetes", "workerId": "w-early",
			"workerIdentityProof": map[string]any{"kubernetesToken": token}})
		return status, string(raw)
	}
	counts := func() workermanager.Counts {
		t.Helper()
		c, err := s.Store.WorkerPoolCounts(ctx, []string{"proj/pods"})
		require.NoError(t, err)
		return c["proj/pods"]
	}

	status, text := register("forged")
	require.Equal(t, http.StatusBadRequest, status, text)
	require.Equal(t, 1, counts().RequestedCount)

	status, text = register("pod-token")
	require.Equal(t, http.StatusOK, status, text)
	got, err := s.Store.GetPoolWorker(ctx, w.Key())
	require.NoError(t, err)
	require.Equal(t, workermanager.StateRunning, got.State)
	require.JSONEq(t, `{"namespace":"ci","pod":"hopper-p","uid":"uid-1"}`, string(got.ProviderData), "bound to the Pod its proof names")
	c := counts()
	require.Equal(t, 0, c.RequestedCount)
	require.Equal(t, 1, c.RunningCount)

	// The provisioner records the create's answer afterwards.
	_, err = s.Store.UpdatePoolWorker(ctx, w.Key(), func(w *workermanager.Worker) error {
		w.ProviderData = json.RawMessage(`{"namespace":"ci","pod":"hopper-p","uid":"uid-1"}`)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, c, counts(), "counted once")

	status, text = register("pod-token")
	require.Equal(t, http.StatusBadRequest, status, "replayed: %s", text)
	require.Equal(t, c, counts())
}
