package authapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"strconv"
	"strings"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Paths of hopper's OpenID issuer, at the root URL (the issuer).
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
)

// scopesCreateIDToken is createIdToken's scope: a token for an audience
// needs auth:create-id-token:<audience>.
const scopesCreateIDToken = `"` + auth.ScopeCreateIDTokenPrefix + `<audience>"`

// Identity is what hopper needs to vouch for tasks as an OpenID issuer.
// Without Keys the issuer's routes are not served.
type Identity struct {
	// RootURL is the issuer (the tokens' iss).
	RootURL string
	// Keys signs and publishes.
	Keys *Keyring
	// Tasks finds the run a token is asked for.
	Tasks interface {
		GetTask(ctx context.Context, taskID string) (*queue.TaskState, error)
	}
	// Forge finds what the forge integration vouches for about a task.
	Forge interface {
		GetTaskIdentity(ctx context.Context, taskID string) (*store.TaskIdentity, error)
	}
	// RunIssuer is the client that issues runs' credentials (the
	// queue's); credentials named like a run's but issued by anyone else
	// get no token.
	RunIssuer string
}

// IdentityRoutes are the Auth methods that vouch for tasks outside
// Taskcluster: createIdToken with the issuer's discovery document and key
// set (when d.Identity has Keys), and awsS3Credentials. They are served
// beside Routes' as one more service (the composition root's identity
// service), with the same Deps.
func IdentityRoutes(d Deps) []api.Route {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	h := &handlers{Deps: d}
	routes := []api.Route{{Name: "awsS3Credentials", Method: http.MethodGet, Paths: []string{BasePath + "/aws/s3/{level}/{bucket}/{prefix...}"},
		Query: []string{"format"}, Scopes: scopesAWSS3, Handle: h.awsS3Credentials}}
	routes = append(routes, h.azureRoutes()...)
	if d.Identity.Keys == nil {
		return routes
	}
	return append(routes, []api.Route{
		{Name: "openidConfiguration", Method: http.MethodGet, Paths: []string{DiscoveryPath}, Handle: h.openidConfiguration},
		{Name: "jwks", Method: http.MethodGet, Paths: []string{JWKSPath}, Handle: h.jwks},
		{Name: "createIdToken", Method: http.MethodPost, Paths: []string{BasePath + "/task/{taskId}/runs/{runId}/id-token"},
			Input: "create-id-token-request", Scopes: scopesCreateIDToken, Handle: h.createIDToken},
	}...)
}

// discovery is the OpenID provider metadata clouds read (OpenID Connect
// Discovery 1.0 §3). hopper only issues ID tokens to tasks, so it names
// no authorization or token endpoint, as GitHub Actions' issuer names
// none: verifiers need the issuer and the keys.
type discovery struct {
	Issuer                           string   `json:"issuer"`
	JWKSURI                          string   `json:"jwks_uri"`
	ResponseTypesSupported           []string `json:"response_types_supported"`
	SubjectTypesSupported            []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported"`
	ClaimsSupported                  []string `json:"claims_supported"`
	ScopesSupported                  []string `json:"scopes_supported"`
}

func (h *handlers) openidConfiguration(c *api.Call) (any, error) {
	root := strings.TrimRight(h.Identity.RootURL, "/")
	return discovery{
		Issuer: root, JWKSURI: root + JWKSPath,
		ResponseTypesSupported:           []string{"id_token"},
		SubjectTypesSupported:            []string{"public"},
		IDTokenSigningAlgValuesSupported: []string{auth.SigningAlgorithm},
		ClaimsSupported:                  auth.ClaimNames(),
		ScopesSupported:                  []string{"openid"},
	}, nil
}

func (h *handlers) jwks(c *api.Call) (any, error) {
	keys, now, err := h.Identity.Keys.Schedule(c.Context())
	if err != nil {
		return nil, err
	}
	// Verifiers may cache the set a while; a new key is published an hour
	// before it signs.
	return &api.Response{Body: keys.JWKS(now), Header: http.Header{"Cache-Control": {"public, max-age=300"}}}, nil
}

type idTokenInput struct {
	Audience string `json:"audience"`
	// Subject, if set, is the subject the caller expects: a run whose
	// subject differs (a fork's pull request asking for a branch's) is
	// refused rather than given a token a cloud would refuse later.
	Subject string `json:"subject"`
}

type idTokenReply struct {
	Token   string     `json:"token"`
	Subject string     `json:"subject"`
	Expires queue.Time `json:"expires"`
}

// createIDToken signs an identity token for the caller's own run
// (docs/contract/auth.md §4.1). The caller must be the run's credentials
// as the queue issued them, the run must be running and claimed by the
// worker those credentials name, and the caller's scopes must allow the
// audience; every refusal is in the audit log.
func (h *handlers) createIDToken(c *api.Call) (any, error) {
	taskID, runID := c.Params["taskId"], c.IntParam("runId")
	var in idTokenInput
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	run := taskID + "/" + strconv.Itoa(runID)
	refuse := func(err error) (any, error) {
		var apiErr *api.Error
		reason := err.Error()
		if errors.As(err, &apiErr) {
			reason = apiErr.Code
		}
		h.auditRefusal(c, store.AuditIDToken, run, "id token for "+in.Audience+" refused: "+reason)
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"audience": in.Audience}); err != nil {
		return refuse(err)
	}
	caller, err := h.Caller(c)
	if err != nil {
		return nil, err
	}
	creds, ok := auth.ParseRunClientID(caller.ClientID)
	if !ok || caller.Issuer != h.Identity.RunIssuer {
		return refuse(forbidden("only a run's own credentials, as the queue issued them, may ask for its identity token; %s are not a run's", caller.ClientID))
	}
	if creds.TaskID != taskID || creds.RunID != runID {
		return refuse(forbidden("the credentials of run %s/%d cannot ask for the identity token of run %s", creds.TaskID, creds.RunID, run))
	}
	ts, err := h.Identity.Tasks.GetTask(c.Context(), taskID)
	if errors.Is(err, store.ErrNotFound) {
		return refuse(notFound("task %s not found", taskID))
	}
	if err != nil {
		return nil, err
	}
	if runID >= len(ts.Runs) {
		return refuse(notFound("task %s has no run %d", taskID, runID))
	}
	r := ts.Runs[runID]
	if r.State != queue.StateRunning || r.TakenUntil == nil || !r.TakenUntil.Time.After(c.Now) {
		return refuse(conflictf("run %s is %s: identity tokens are only issued while a run is running", run, r.State))
	}
	if r.WorkerGroup != creds.WorkerGroup || r.WorkerID != creds.WorkerID {
		return refuse(forbidden("run %s is claimed by %s/%s, not by the worker these credentials name", run, r.WorkerGroup, r.WorkerID))
	}
	req := auth.TokenRequest{Issuer: strings.TrimRight(h.Identity.RootURL, "/"), Audience: in.Audience, TaskID: taskID, RunID: runID,
		TaskGroupID: ts.Task.TaskGroupID, TaskQueueID: ts.Task.TaskQueueID, SchedulerID: ts.Task.SchedulerID,
		ProjectID: ts.Task.ProjectID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID, Now: c.Now, TakenUntil: r.TakenUntil.Time}
	if req.Forge, err = h.forgeClaims(c.Context(), taskID); err != nil {
		return nil, err
	}
	if in.Subject != "" && in.Subject != req.Subject() {
		return refuse(forbidden("run %s has the subject %s, not %s", run, req.Subject(), in.Subject))
	}
	keys, now, err := h.Identity.Keys.Schedule(c.Context())
	if err != nil {
		return nil, err
	}
	key := keys.Signing(now)
	if key == nil {
		return nil, errors.New("no identity-token signing key has activated yet")
	}
	tok, err := auth.Sign(key, req.Claims())
	if err != nil {
		return nil, err
	}
	return idTokenReply{Token: tok, Subject: req.Subject(), Expires: queue.NewTime(req.Expiry())}, nil
}

// forgeClaims returns what the forge integration vouches for about the
// task, nil if it did not create it.
func (h *handlers) forgeClaims(ctx context.Context, taskID string) (*auth.ForgeClaims, error) {
	if h.Identity.Forge == nil {
		return nil, nil
	}
	rec, err := h.Identity.Forge.GetTaskIdentity(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := auth.DecodeForgeClaims(rec.Claims)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", taskID, err)
	}
	return f, nil
}

// auditRefusal records a refused token or credential in the audit log,
// under the caller (anonymous callers as "anonymous"). A failure to
// record is logged, not answered: the caller is refused either way.
func (h *handlers) auditRefusal(c *api.Call, entityType, entityID, action string) {
	who := "anonymous"
	if res, err := h.Caller(c); err == nil && res.ClientID != "" {
		who = res.ClientID
	}
	if len(action) > 500 {
		action = action[:500]
	}
	if err := h.Store.RecordAudit(c.Context(), entityType, entityID, store.Audit{ClientID: who, Action: action, At: stamp(c)}); err != nil {
		h.Logger.Warn("recording a refusal in the audit log", "entityType", entityType, "entityId", entityID, "error", err)
	}
}

func forbidden(format string, args ...any) error {
	return &api.Error{Code: api.CodeInsufficientScopes, Message: fmt.Sprintf(format, args...)}
}

func conflictf(format string, args ...any) error {
	return &api.Error{Code: api.CodeRequestConflict, Message: fmt.Sprintf(format, args...)}
}
