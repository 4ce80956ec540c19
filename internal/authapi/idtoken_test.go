package authapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// identityBundle is an API server with the Auth and identity routes.
type identityBundle struct {
	*apitest.Server
	logs *e2e.SyncBuffer
}

// identityDeps are the identity routes' dependencies over s; s3 backs
// awsS3Credentials (nil: no bucket).
func identityDeps(s *apitest.Server, s3 *authapi.S3STS) authapi.Deps {
	return authapi.Deps{Store: s.Store, Caller: s.Security.Authorizer.Caller, Logger: s.Logger, S3: s3,
		Identity: authapi.Identity{RootURL: s.URL, Keys: authapi.NewKeyring(s.Store, s.Security.Sealer, s.Clock),
			Tasks: s.Store, Forge: s.Store, RunIssuer: server.QueueClientID}}
}

func startIdentity(t testing.TB, s3 *authapi.S3STS) *identityBundle {
	t.Helper()
	return startIdentityWith(t, func(d *authapi.Deps) { d.S3 = s3 })
}

// startIdentityAzure serves the Azure methods over az.
func startIdentityAzure(t testing.TB, az *authapi.AzureStorage) *identityBundle {
	t.Helper()
	return startIdentityWith(t, func(d *authapi.Deps) { d.Azure = az })
}

func startIdentityWith(t testing.TB, tune func(*authapi.Deps)) *identityBundle {
	t.Helper()
	logs := &e2e.SyncBuffer{}
	srv := apitest.Start(t, apitest.Options{Clock: &testclock.Shifted{},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Routes: func(s *apitest.Server) []api.Route {
			d := identityDeps(s, nil)
			tune(&d)
			return append(s.AuthRoutes(), authapi.IdentityRoutes(d)...)
		}})
	return &identityBundle{Server: srv, logs: logs}
}

// runningTask creates a task with scopes in a queue of its own and claims
// it; it returns the task's id and the run's credentials.
func (b *identityBundle) runningTask(t testing.TB, mutate func(*tcclient.TaskDefinition)) (string, *tcclient.Client) {
	t.Helper()
	ctx := context.Background()
	q := "id-test/q" + strings.ToLower(tcclient.NewTaskID()[:8])
	q = strings.NewReplacer("_", "x", "-", "y").Replace(q)
	now := time.Now()
	def := &tcclient.TaskDefinition{TaskQueueID: q, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload: json.RawMessage(`{}`), ProjectID: "web",
		Metadata: tcclient.TaskMetadata{Name: "id", Description: "identity test", Owner: "e2e@example.com", Source: "https://example.com"}}
	if mutate != nil {
		mutate(def)
	}
	taskID := tcclient.NewTaskID()
	_, err := b.Root.CreateTask(ctx, taskID, def)
	require.NoError(t, err)
	res, err := b.Root.ClaimWork(ctx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "wg", WorkerID: "w1", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
	creds := res.Tasks[0].Credentials
	return taskID, b.Root.WithCredentials(&creds)
}

func withScopes(scopes ...string) func(*tcclient.TaskDefinition) {
	return func(d *tcclient.TaskDefinition) { d.Scopes = scopes }
}

// requireRefused checks a call failed with Taskcluster's error code and
// status, and that the refusal is in the audit log under the caller.
func (b *identityBundle) requireRefused(t testing.TB, err error, status int, code, caller string) {
	t.Helper()
	var apiErr *tcclient.APIError
	require.True(t, errors.As(err, &apiErr), "an API error: %v", err)
	require.Equal(t, status, apiErr.StatusCode, apiErr.Message)
	require.Equal(t, code, apiErr.Code)
	entries, _, err := b.Store.ListAuditHistory(context.Background(), store.AuditQuery{ByClient: caller}, store.Page{})
	require.NoError(t, err)
	found := false
	for _, e := range entries {
		found = found || strings.Contains(e.Action, code)
	}
	require.True(t, found, "the refusal (%s) is in %s's audit history: %+v", code, caller, entries)
}

// TestIDTokenVerifiedByGoOIDC has a well-kept OpenID client library
// (coreos/go-oidc) read hopper's discovery document, fetch its key set and
// verify a task's token, whose claims name the run.
func TestIDTokenVerifiedByGoOIDC(t *testing.T) {
	t.Parallel()
	b := startIdentity(t, nil)
	ctx := context.Background()
	taskID, run := b.runningTask(t, withScopes("auth:create-id-token:minio"))
	tok, err := run.CreateIDToken(ctx, taskID, 0, "minio")
	require.NoError(t, err)
	require.Equal(t, "project:web:task-queue:"+mustTask(t, b, taskID).TaskQueueID, tok.Subject)

	provider, err := oidc.NewProvider(ctx, b.URL)
	require.NoError(t, err, "go-oidc reads the discovery document (its issuer is the root URL)")
	idt, err := provider.Verifier(&oidc.Config{ClientID: "minio"}).Verify(ctx, tok.Token)
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, idt.Claims(&claims))
	require.Equal(t, taskID, claims["task_id"])
	require.EqualValues(t, 0, claims["run_id"])
	require.Equal(t, "wg", claims["worker_group"])
	require.Equal(t, "w1", claims["worker_id"])
	require.Equal(t, taskID, claims["task_group_id"])
	require.Equal(t, tok.Subject, idt.Subject)
	status, err := b.Root.Status(ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, status.Runs[0].TakenUntil.Time.Unix(), idt.Expiry.Unix(), "the token expires with the claim")

	_, err = provider.Verifier(&oidc.Config{ClientID: "someone-else"}).Verify(ctx, tok.Token)
	require.Error(t, err, "another audience does not accept it")
	parts := strings.Split(tok.Token, ".")
	tampered := parts[0] + "." + parts[1][:len(parts[1])-2] + "AA." + parts[2]
	_, err = provider.Verifier(&oidc.Config{ClientID: "minio"}).Verify(ctx, tampered)
	require.Error(t, err, "a changed token does not verify")
	require.NotContains(t, b.logs.String(), tok.Token, "no token in the log")
}

func mustTask(t *testing.T, b *identityBundle, taskID string) *tcclient.TaskDefinition {
	t.Helper()
	def, err := b.Root.Task(context.Background(), taskID)
	require.NoError(t, err)
	return def
}

// TestIDTokenRefusals: no scope for the audience, another run's
// credentials, credentials that are not a run's (or that only carry a
// run's name), a resolved run: each refused with Taskcluster's error and
// recorded in the audit log.
func TestIDTokenRefusals(t *testing.T) {
	t.Parallel()
	b := startIdentity(t, nil)
	ctx := context.Background()
	taskID, run := b.runningTask(t, withScopes("auth:create-id-token:minio"))
	otherID, other := b.runningTask(t, withScopes("auth:create-id-token:*"))
	runCaller := func(c *tcclient.Client) string { return c.Credentials.ClientID }

	_, err := run.CreateIDToken(ctx, taskID, 0, "aws")
	b.requireRefused(t, err, 403, "InsufficientScopes", runCaller(run))

	_, err = other.CreateIDToken(ctx, taskID, 0, "minio")
	b.requireRefused(t, err, 403, "InsufficientScopes", runCaller(other))
	require.Contains(t, err.Error(), "cannot ask for the identity token of run "+taskID+"/0")

	_, err = b.Root.CreateIDToken(ctx, taskID, 0, "minio")
	b.requireRefused(t, err, 403, "InsufficientScopes", server.RootClientID)

	// Temporary credentials named like the run's, issued by root rather
	// than by the queue.
	forged, err := auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{
		ClientID: run.Credentials.ClientID, Start: time.Now().Add(-time.Minute), Expiry: time.Now().Add(time.Hour),
		Scopes: []string{"auth:create-id-token:minio"}, Issuer: auth.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}})
	require.NoError(t, err)
	_, err = b.Root.WithCredentials(&tcclient.Credentials{ClientID: forged.ClientID, AccessToken: forged.AccessToken,
		Certificate: forged.Certificate}).CreateIDToken(ctx, taskID, 0, "minio")
	b.requireRefused(t, err, 403, "InsufficientScopes", forged.ClientID)

	_, err = run.CreateIDToken(ctx, taskID, 0, "minio")
	require.NoError(t, err, "the run itself may")
	_, err = run.ReportCompleted(ctx, taskID, 0)
	require.NoError(t, err)
	_, err = run.CreateIDToken(ctx, taskID, 0, "minio")
	b.requireRefused(t, err, 409, "RequestConflict", runCaller(run))
	_, err = other.CreateIDToken(ctx, otherID, 0, "anything")
	require.NoError(t, err, "a wildcard scope allows any audience")
}

// TestIDTokenForgeClaims: a task the forge integration vouched for
// carries its repository, ref, commit and event, and its subject is the
// role its scopes came from, so a fork's pull request carries the
// untrusted subject whatever its ref, and asking for a branch's subject
// is refused and audited.
func TestIDTokenForgeClaims(t *testing.T) {
	t.Parallel()
	b := startIdentity(t, nil)
	ctx := context.Background()
	taskID, run := b.runningTask(t, withScopes("auth:create-id-token:minio"))
	claims, err := auth.EncodeForgeClaims(&auth.ForgeClaims{Host: "github.com", Repository: "acme/app", Ref: "refs/pull/7/head",
		SHA: "0123456789abcdef0123456789abcdef01234567", Event: "pull_request.opened", PullRequest: 7, Untrusted: true,
		Role: "repo:github.com/acme/app:pull-request-untrusted"})
	require.NoError(t, err)
	require.NoError(t, b.Store.PutTaskIdentity(ctx, &store.TaskIdentity{TaskID: taskID, Claims: claims, Expires: time.Now().Add(time.Hour)}))
	_, err = run.CreateIDToken(ctx, taskID, 0, "minio", "repo:github.com/acme/app:branch:main")
	b.requireRefused(t, err, 403, "InsufficientScopes", run.Credentials.ClientID)
	require.Contains(t, err.Error(), "has the subject repo:github.com/acme/app:pull-request-untrusted, not repo:github.com/acme/app:branch:main")
	tok, err := run.CreateIDToken(ctx, taskID, 0, "minio", "repo:github.com/acme/app:pull-request-untrusted")
	require.NoError(t, err)
	require.Equal(t, "repo:github.com/acme/app:pull-request-untrusted", tok.Subject)
	provider, err := oidc.NewProvider(ctx, b.URL)
	require.NoError(t, err)
	idt, err := provider.Verifier(&oidc.Config{ClientID: "minio"}).Verify(ctx, tok.Token)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, idt.Claims(&got))
	require.Equal(t, "acme/app", got["repository"])
	require.Equal(t, "github.com", got["forge_host"])
	require.Equal(t, "refs/pull/7/head", got["ref"])
	require.Equal(t, "pull_request.opened", got["event"])
	require.Equal(t, true, got["untrusted_pull_request"])
	require.EqualValues(t, 7, got["pull_request"])
}

// TestIDTokenOutlivesRotation: a token stays verifiable (go-oidc, against
// the JWKS hopper serves) while its key is rotated out: the next key is
// published before it signs, and the old one stays until no token it
// signed can still be valid.
func TestIDTokenOutlivesRotation(t *testing.T) {
	t.Parallel()
	b := startIdentity(t, nil)
	ctx := context.Background()
	taskID, run := b.runningTask(t, withScopes("auth:create-id-token:minio"))
	tok, err := run.CreateIDToken(ctx, taskID, 0, "minio")
	require.NoError(t, err)
	issued := time.Now()
	clock := b.Clock.(*testclock.Shifted)
	verify := func() error {
		keys := oidc.NewRemoteKeySet(ctx, b.URL+authapi.JWKSPath)
		v := oidc.NewVerifier(b.URL, keys, &oidc.Config{ClientID: "minio", Now: func() time.Time { return issued }})
		_, err := v.Verify(ctx, tok.Token)
		return err
	}
	kids := func() int {
		var set struct{ Keys []map[string]any }
		resp, err := http.Get(b.URL + authapi.JWKSPath)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&set))
		return len(set.Keys)
	}
	require.NoError(t, verify())
	require.Equal(t, 1, kids())

	clock.Advance(auth.SigningKeyRotation - auth.SigningKeyLead + time.Minute)
	require.Equal(t, 2, kids(), "the next key is published an hour before it signs")
	require.NoError(t, verify())
	clock.Advance(auth.SigningKeyLead + auth.MaxIDTokenLifetime - 2*time.Minute)
	require.Equal(t, 2, kids(), "the old key stays while a token it signed may be valid")
	require.NoError(t, verify())
	clock.Advance(3 * time.Minute)
	require.Equal(t, 1, kids(), "then it is retired")
	require.Error(t, verify(), "its tokens are past their life by then")
}
