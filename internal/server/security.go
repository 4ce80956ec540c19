package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/hopperapi"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
)

// Static client ids.
const (
	RootClientID  = "static/taskcluster/root"
	QueueClientID = "static/taskcluster/queue"
)

// DefaultAnonymousScopes are what the anonymous role grants when hopper
// creates it: reading tasks, statuses, public artifacts, queue metadata
// and the index, as a public Taskcluster deployment does (auth spec §4.6),
// and listing tasks (hopper's own /api/hopper/v1/tasks). An
// operator may change the role; hopper never overwrites it at startup.
// Changing these defaults needs a migration that gives them to roles an
// earlier hopper created and nobody changed, as migration 019 does
// (TestAnonymousRoleUpgradeGivesTodaysDefaults fails until there is one).
var DefaultAnonymousScopes = []string{
	"auth:current-scopes", "auth:expand-scopes", "auth:get-client:*", "auth:get-role:*", "auth:list-clients", "auth:list-roles",
	"queue:get-artifact:public/*", "queue:get-provisioner:*", "queue:get-task:*", "queue:get-task-queue:*",
	"queue:get-worker:*", "queue:get-worker-type:*", "queue:list-artifacts:*", "queue:list-dependent-tasks:*",
	"queue:list-provisioners", "queue:list-task-group:*", "queue:list-task-queues", "queue:list-worker-types:*",
	"queue:list-workers:*", "queue:pending-count:*", "queue:claimed-count:*", "queue:status:*",
	"queue:pending-list:*", "queue:claimed-list:*",
	"index:find-task:*", "index:list-namespaces:*", "index:list-tasks:*",
	"purge-cache:purge-requests:*",
	hopperapi.ScopeListTasks,
}

var accessTokenPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{22,66}$`)

// Security is what the API needs to authenticate, authorize and mint
// credentials, built from the store and the server secret.
type Security struct {
	Authenticator *auth.Authenticator
	Authorizer    *api.HawkAuthorizer
	Issuer        *TaskIssuer
	Sealer        *auth.Sealer
	Clients       *ClientDirectory
	Roles         *RoleCache
}

// queueAccessToken derives the queue's own issuing token from the server
// secret, so every replica sharing the secret signs identically and the
// token is never stored.
func queueAccessToken(key [32]byte) string {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("hopper issuer " + QueueClientID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// NewSecurity builds authentication over the store's clients and roles plus
// the two static clients, and seeds the anonymous role if it is missing.
func NewSecurity(ctx context.Context, st store.AuthStore, rootAccessToken string, key [32]byte, clock clock.Clock, log *slog.Logger) (*Security, error) {
	if !accessTokenPattern.MatchString(rootAccessToken) {
		return nil, errors.New("the root access token must be 22–66 characters of A-Z a-z 0-9 _ -")
	}
	sealer, err := auth.NewSealer(key[:])
	if err != nil {
		return nil, err
	}
	forever := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	queueCreds := auth.Credentials{ClientID: QueueClientID, AccessToken: queueAccessToken(key)}
	clients := &ClientDirectory{store: st, sealer: sealer, clock: clock, log: log, static: map[string]auth.Client{
		RootClientID:  {ClientID: RootClientID, AccessToken: rootAccessToken, Scopes: []string{"*"}, Expires: forever},
		QueueClientID: {ClientID: QueueClientID, AccessToken: queueCreds.AccessToken, Scopes: []string{"*"}, Expires: forever},
	}}
	roles := &RoleCache{store: st, clock: clock}
	if err := seedAnonymousRole(ctx, st, clock.Now()); err != nil {
		return nil, err
	}
	authn := auth.NewAuthenticator(auth.AuthenticatorOptions{Clients: clients, Roles: roles, NowFunc: clock.Now})
	return &Security{
		Authenticator: authn,
		Authorizer:    &api.HawkAuthorizer{Authenticator: authn},
		Issuer:        &TaskIssuer{creds: queueCreds},
		Sealer:        sealer,
		Clients:       clients,
		Roles:         roles,
	}, nil
}

func seedAnonymousRole(ctx context.Context, st store.AuthStore, now time.Time) error {
	_, err := st.PutRole(ctx, auth.AnonymousRole, func(existing *store.Role) (*store.Role, error) {
		if existing != nil {
			return nil, errRoleExists
		}
		return &store.Role{RoleID: auth.AnonymousRole, Scopes: DefaultAnonymousScopes,
			Description: "Scopes every caller has, with or without credentials (created by hopper; edit freely).",
			Created:     now, LastModified: now}, nil
	}, nil)
	if errors.Is(err, errRoleExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the anonymous role: %w", err)
	}
	return nil
}

var errRoleExists = errors.New("role exists")

// ClientDirectory finds clients for authentication: the static ones in
// memory, the others in the store with their sealed tokens opened.
type ClientDirectory struct {
	store  store.AuthStore
	sealer *auth.Sealer
	static map[string]auth.Client
	clock  clock.Clock
	log    *slog.Logger

	// usedMarked remembers when this process last recorded a client's use
	// (clientId → time.Time), so a busy client costs one write per period.
	usedMarked sync.Map
}

// lastUsedGranularity is how stale a client's lastDateUsed may be; as in
// Taskcluster, it is only rewritten every few hours, off the request path.
const lastUsedGranularity = 6 * time.Hour

// IsStatic reports whether clientID is a static (configured) client.
func (d *ClientDirectory) IsStatic(clientID string) bool {
	_, ok := d.static[clientID]
	return ok
}

// Client implements auth.ClientLookup.
func (d *ClientDirectory) Client(ctx context.Context, clientID string) (auth.Client, error) {
	if c, ok := d.static[clientID]; ok {
		return c, nil
	}
	c, err := d.store.GetClient(ctx, clientID)
	if errors.Is(err, store.ErrNotFound) {
		return auth.Client{}, auth.ErrClientNotFound
	}
	if err != nil {
		return auth.Client{}, err
	}
	token, err := d.sealer.Open(c.AccessToken, c.ClientID)
	if err != nil {
		return auth.Client{}, fmt.Errorf("opening the access token of %s (wrong HOPPER_SECRET_KEY?): %w", clientID, err)
	}
	d.markUsed(ctx, c)
	return auth.Client{ClientID: c.ClientID, AccessToken: token, Scopes: c.Scopes, Disabled: c.Disabled, Expires: c.Expires}, nil
}

// markUsed records, in the background, that a stored client is in use, when
// its lastDateUsed is older than lastUsedGranularity.
func (d *ClientDirectory) markUsed(ctx context.Context, c *store.Client) {
	now := d.clock.Now()
	if now.Sub(c.LastDateUsed) < lastUsedGranularity {
		return
	}
	if last, ok := d.usedMarked.Load(c.ClientID); ok && now.Sub(last.(time.Time)) < lastUsedGranularity {
		return
	}
	d.usedMarked.Store(c.ClientID, now)
	go func() {
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := d.store.UpdateClient(bg, c.ClientID, func(cl *store.Client) error {
			cl.LastDateUsed = now.UTC().Truncate(time.Millisecond)
			return nil
		}, nil)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			d.log.Warn("recording that a client was used", "clientId", c.ClientID, "error", err)
		}
	}()
}

// RoleCache keeps the role expander of the current role set. It re-reads
// the store's roles version at most once per roleRecheck, and rebuilds the
// expander only when the version changed: a role change made through any
// replica applies to every request within that interval, and authentication
// costs no database round trip in between.
type RoleCache struct {
	store store.AuthStore
	clock clock.Clock

	mu        sync.Mutex
	version   int64
	checkedAt time.Time
	expander  *auth.Expander
}

// roleRecheck bounds how stale a replica's view of the roles may be.
const roleRecheck = time.Second

// Expander implements auth.ExpanderSource.
func (r *RoleCache) Expander(ctx context.Context) (*auth.Expander, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.expander != nil && now.Sub(r.checkedAt) < roleRecheck && !now.Before(r.checkedAt) {
		return r.expander, nil
	}
	v, err := r.store.RolesVersion(ctx)
	if err != nil {
		return nil, err
	}
	if r.expander == nil || r.version != v {
		roles, err := r.store.ListRoles(ctx)
		if err != nil {
			return nil, err
		}
		set := make([]auth.Role, 0, len(roles))
		for _, role := range roles {
			set = append(set, auth.Role{RoleID: role.RoleID, Scopes: role.Scopes})
		}
		e, err := auth.NewExpander(set)
		if err != nil {
			return nil, fmt.Errorf("building role expansion: %w", err)
		}
		r.version, r.expander = v, e
	}
	r.checkedAt = now
	return r.expander, nil
}

// Invalidate makes the next authentication re-read the roles (this process
// changed them).
func (r *RoleCache) Invalidate() {
	r.mu.Lock()
	r.checkedAt = time.Time{}
	r.mu.Unlock()
}

// TaskIssuer issues claim credentials signed by the queue's identity.
type TaskIssuer struct{ creds auth.Credentials }

// TaskCredentials implements queueapi.CredentialIssuer.
func (i *TaskIssuer) TaskCredentials(taskID string, runID int, workerGroup, workerID string, now, takenUntil time.Time, taskScopes []string) (queueapi.Credentials, error) {
	c, err := auth.TaskCredentials(auth.TaskCredentialsOptions{
		TaskID: taskID, RunID: runID, WorkerGroup: workerGroup, WorkerID: workerID,
		TakenUntil: takenUntil, TaskScopes: taskScopes, Now: now, Issuer: i.creds,
	})
	if err != nil {
		return queueapi.Credentials{}, err
	}
	return queueapi.Credentials{ClientID: c.ClientID, AccessToken: c.AccessToken, Certificate: c.Certificate}, nil
}

// ScopedCredentials implements queueapi.ScopedIssuer: named temporary
// credentials signed by the queue's identity (object artifacts hand them to
// uploaders and downloaders).
func (i *TaskIssuer) ScopedCredentials(clientID string, scopes []string, start, expiry time.Time) (queueapi.Credentials, error) {
	c, err := auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{
		ClientID: clientID, Start: start, Expiry: expiry, Scopes: scopes, Issuer: i.creds,
	})
	if err != nil {
		return queueapi.Credentials{}, err
	}
	return queueapi.Credentials{ClientID: c.ClientID, AccessToken: c.AccessToken, Certificate: c.Certificate}, nil
}
