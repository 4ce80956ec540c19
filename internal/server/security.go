package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/store"
)

// Static client ids.
const (
	RootClientID  = "static/taskcluster/root"
	QueueClientID = "static/taskcluster/queue"
)

// security bundles what the API needs to authenticate, authorize and mint
// credentials.
type security struct {
	authorizer api.Authorizer
	issuer     api.CredentialIssuer
	routes     []api.Route
}

// queueAccessToken derives the queue's own issuing token from the server
// secret, so every replica sharing the secret signs identically and the
// token never needs storing.
func queueAccessToken(key [32]byte) string {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("hopper issuer " + QueueClientID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func newSecurity(_ context.Context, _ store.Store, _ Config, key [32]byte) (*security, error) {
	issuer := &taskIssuer{creds: auth.Credentials{ClientID: QueueClientID, AccessToken: queueAccessToken(key)}}
	return &security{authorizer: allowAll{}, issuer: issuer}, nil
}

// allowAll authorizes every call: scope enforcement is switched on by the
// auth integration.
type allowAll struct{}

func (allowAll) Authorize(*api.Call, string, map[string]any) error { return nil }

// taskIssuer issues claim credentials signed by the queue's identity.
type taskIssuer struct{ creds auth.Credentials }

func (i *taskIssuer) TaskCredentials(taskID string, runID int, workerGroup, workerID string, now, takenUntil time.Time, taskScopes []string) (api.Credentials, error) {
	c, err := auth.TaskCredentials(auth.TaskCredentialsOptions{
		TaskID: taskID, RunID: runID, WorkerGroup: workerGroup, WorkerID: workerID,
		TakenUntil: takenUntil, TaskScopes: taskScopes, Now: now, Issuer: i.creds,
	})
	if err != nil {
		return api.Credentials{}, err
	}
	return api.Credentials{ClientID: c.ClientID, AccessToken: c.AccessToken, Certificate: c.Certificate}, nil
}
