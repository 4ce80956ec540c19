package workermanagerapi

import (
	"encoding/json"
	"errors"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// newSecret is a reregistration secret: two slugids, 44 characters.
func newSecret() string { return ident.NewSlugID() + ident.NewSlugID() }

// registerWorker trades a worker's proof of identity for credentials and
// its config. No scopes: the worker has no credentials yet; the proof is
// checked against the worker's record instead.
func (h *handlers) registerWorker(c *api.Call) (any, error) {
	var in struct {
		WorkerPoolID        string         `json:"workerPoolId"`
		ProviderID          string         `json:"providerId"`
		WorkerGroup         string         `json:"workerGroup"`
		WorkerID            string         `json:"workerId"`
		WorkerIdentityProof map[string]any `json:"workerIdentityProof"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	pool, err := h.Store.GetWorkerPool(c.Context(), in.WorkerPoolID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker pool %s does not exist", in.WorkerPoolID)
	}
	if err != nil {
		return nil, err
	}
	prov, ok := h.providers[in.ProviderID]
	if !ok {
		return nil, notFound("Provider %s does not exist", in.ProviderID)
	}
	if !pool.HadProvider(in.ProviderID) {
		return nil, inputError("Worker pool %s not associated with provider %s", in.WorkerPoolID, in.ProviderID)
	}
	k := workermanager.Key{WorkerPoolID: in.WorkerPoolID, WorkerGroup: in.WorkerGroup, WorkerID: in.WorkerID}
	staticSecret, _ := in.WorkerIdentityProof["staticSecret"].(string)
	var proven json.RawMessage
	if prov.Verifier != nil {
		if proven, err = h.verifyIdentity(c, prov, pool, k, in.WorkerIdentityProof); err != nil {
			return nil, err
		}
	}
	secret := newSecret()
	var reg workermanager.Registration
	w, err := h.Store.UpdatePoolWorker(c.Context(), k, func(w *workermanager.Worker) error {
		var err error
		if prov.Verifier != nil {
			// Proven above; once only, so a replayed proof is refused.
			reg, err = w.RegisterProven(pool, in.ProviderID, secret, c.Now)
			if err == nil {
				w.RecordProven(proven)
			}
		} else {
			reg, err = w.Register(pool, prov.Type, in.ProviderID, staticSecret, secret, c.Now)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker %s/%s in worker pool %s does not exist", in.WorkerGroup, in.WorkerID, in.WorkerPoolID)
	}
	if err != nil {
		h.Logger.Info("worker registration refused", "worker", k.String(), "reason", err.Error())
		return nil, refusal(err)
	}
	creds, err := h.credentials(w, c, reg)
	if err != nil {
		return nil, err
	}
	h.Logger.Info("worker registered", "worker", k.String(), "expires", reg.Expires)
	h.publish(c, exchangeWorkerRunning, workerMessage(w, "", c.Now))
	return struct {
		Expires      queue.Time       `json:"expires"`
		Credentials  auth.Credentials `json:"credentials"`
		WorkerConfig json.RawMessage  `json:"workerConfig"`
		Secret       string           `json:"secret"`
	}{timeOut(reg.Expires), creds, pool.WorkerConfig(), secret}, nil
}

// verifyIdentity has the provider check a registering worker's proof
// (outside the worker's transaction: the check may ask the cluster). The
// refusal says nothing of why; the log does.
func (h *handlers) verifyIdentity(c *api.Call, prov Provider, pool *workermanager.Pool, k workermanager.Key, proof map[string]any) (json.RawMessage, error) {
	w, err := h.Store.GetPoolWorker(c.Context(), k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Worker %s/%s in worker pool %s does not exist", k.WorkerGroup, k.WorkerID, k.WorkerPoolID)
	}
	if err != nil {
		return nil, err
	}
	proven, err := prov.Verifier.VerifyIdentity(c.Context(), pool, w, proof)
	if err != nil {
		h.Logger.Info("worker registration refused", "worker", k.String(), "reason", err.Error())
		return nil, inputError("the workerIdentityProof of worker %s/%s was not accepted", k.WorkerGroup, k.WorkerID)
	}
	return proven, nil
}

// credentials issues a registered worker's temporary credentials, named
// after the worker and signed by hopper's issuer.
func (h *handlers) credentials(w *workermanager.Worker, c *api.Call, reg workermanager.Registration) (auth.Credentials, error) {
	return h.Issuer.WorkerCredentials(w.ClientID(), w.CredentialScopes(), c.Now.Add(-workermanager.CredentialStartSkew), reg.Expires)
}

// reregisterWorker trades the secret of the last registration for fresh
// credentials and a new secret.
func (h *handlers) reregisterWorker(c *api.Call) (any, error) {
	var in struct {
		WorkerPoolID string `json:"workerPoolId"`
		WorkerGroup  string `json:"workerGroup"`
		WorkerID     string `json:"workerId"`
		Secret       string `json:"secret"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	k := workermanager.Key{WorkerPoolID: in.WorkerPoolID, WorkerGroup: in.WorkerGroup, WorkerID: in.WorkerID}
	if err := authorize(c, keyParams(k)); err != nil {
		return nil, err
	}
	pool, err := h.Store.GetWorkerPool(c.Context(), in.WorkerPoolID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	secret := newSecret()
	var reg workermanager.Registration
	w, err := h.Store.UpdatePoolWorker(c.Context(), k, func(w *workermanager.Worker) error {
		var err error
		reg, err = w.Reregister(pool, in.Secret, secret, c.Now)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, inputError("Could not generate credentials for this secret")
	}
	if err != nil {
		return nil, refusal(err)
	}
	creds, err := h.credentials(w, c, reg)
	if err != nil {
		return nil, err
	}
	return struct {
		Expires     queue.Time       `json:"expires"`
		Credentials auth.Credentials `json:"credentials"`
		Secret      string           `json:"secret"`
	}{timeOut(reg.Expires), creds, secret}, nil
}
