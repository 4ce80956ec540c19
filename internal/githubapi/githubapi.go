// Package githubapi serves Taskcluster's Github API v1 at
// <rootUrl>/api/github/v1 over the rules of package github, and runs the
// work its webhook leads to: the Processor turns stored deliveries into
// tasks (created through the queue's own createTask with the
// repository's roles), and the Reporter moves builds on as their task
// groups resolve and sends statuses and comments to the forges.
//
// A delivery is checked (signature over the raw body, constant time),
// stored, and only then acknowledged; everything after that is done from
// the store, so a replica killed mid-way loses nothing and a redelivery
// creates nothing twice.
package githubapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"time"

	"github.com/google/uuid"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/schema"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the Github API lives below the root URL.
const BasePath = "/api/github/v1"

// ExchangePrefix starts the names of the GithubEvents exchanges.
const ExchangePrefix = "exchange/taskcluster-github/v1/"

// ClientID is who the service's tasks are created by, as
// InsufficientScopes messages name it.
const ClientID = "static/taskcluster/github"

// TaskCreator creates a task with the given (expanded) scopes through the
// queue's own createTask logic (api.Server.CreateTaskAs). Refusals are
// *api.Refusal.
type TaskCreator interface {
	CreateTaskAs(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error)
}

// TaskCreatorFunc adapts a function to TaskCreator.
type TaskCreatorFunc func(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error)

// CreateTaskAs implements TaskCreator.
func (f TaskCreatorFunc) CreateTaskAs(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
	return f(ctx, taskID, body, clientID, scopes)
}

// TaskRerunner reruns a task for the service the way a rerunTask call
// made with scopes would (queueapi.Server.RerunTaskAs). A refusal is an
// *api.Error.
type TaskRerunner interface {
	RerunTaskAs(ctx context.Context, taskID, clientID string, scopes []string) (*queue.TaskState, error)
}

// HookTrigger triggers a hook for the service (hooksapi.Firer.Trigger
// behind an adapter): refused is the refusal a repository's users are
// shown (no such hook, a payload or template the hook refuses, a task
// its role does not allow); err is an internal failure.
type HookTrigger interface {
	TriggerHook(ctx context.Context, hookGroupID, hookID string, payload []byte, taskID string, now time.Time) (refused string, err error)
}

// ChangePublisher publishes the task changes of a group cancel
// (api.Server.Publish).
type ChangePublisher interface {
	Publish(ctx context.Context, changes []store.Change)
}

// Store is the store as the github service uses it: its deliveries,
// builds, outbox and check runs, and the task groups of its builds (read
// for their tasks, sealed and cancelled by cancelBuilds).
type Store interface {
	store.GithubStore
	store.GithubCheckStore
	store.TaskGroupStore
	store.OutboxStore
}

// Service is the github service of one hopper: its forges, and what its
// routes, processor and reporter share.
type Service struct {
	Store   Store
	Forges  map[string]*forge.Forge
	Tasks   TaskCreator
	Roles   auth.ExpanderSource
	Schemas *schema.Registry
	Clock   clock.Clock
	Log     *slog.Logger
	// RootURL is hopper's public root URL (links in statuses, the
	// templates' taskcluster_root_url).
	RootURL string
	// IDSecret keys the task ids derived from delivery ids.
	IDSecret []byte
	// Events, if set, receives the GithubEvents messages (an AMQP
	// publisher whose exchange prefix is ExchangePrefix).
	Events events.Publisher
	// Identities, if set, records the forge claims of the tasks the
	// service creates (their identity tokens' repository, ref, commit,
	// event and trust).
	Identities IdentityStore
	// Changes, if set, publishes the task changes of cancelled groups.
	Changes ChangePublisher
	// Hooks, if set, triggers the hooks `.taskcluster.yml` names.
	Hooks HookTrigger
	// Reruns, if set, reruns the task of a check run a user asked to run
	// again.
	Reruns TaskRerunner
	// Artifacts, if set, reads the artifacts a resolved run's check run
	// shows (its log excerpt, custom text and annotations).
	Artifacts ArtifactReader
	// Kick, if set, is called when a delivery was stored or an outbox
	// entry queued, so the duties look at once.
	Kick func()
	// Lease is how long a processor holds a delivery (default 2 min).
	Lease time.Duration
	// Owner names this replica's reporter in the outbox's leases
	// (default: a random id).
	Owner string

	// renders holds a slot per renderTaskclusterYml running.
	renders chan struct{}
}

// renderSlots is how many renderTaskclusterYml calls run at once in a
// replica: one per CPU, each bounded by jsone.DefaultLimits.
func renderSlots() int { return runtime.GOMAXPROCS(0) }

// NewService checks and indexes the forges.
func NewService(s Service, forges []*forge.Forge) (*Service, error) {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.Lease <= 0 {
		s.Lease = 2 * time.Minute
	}
	if s.Owner == "" {
		s.Owner = "forge-" + uuid.NewString()
	}
	s.renders = make(chan struct{}, renderSlots())
	s.Forges = map[string]*forge.Forge{}
	for _, f := range forges {
		s.Forges[f.Host] = f
	}
	if s.Schemas == nil {
		reg, err := schema.New()
		if err != nil {
			return nil, err
		}
		s.Schemas = reg
	}
	return &s, nil
}

// Scope expressions of the endpoints, as Taskcluster declares them
// (separators included: `owner:repo` on some, `owner/repo` on others).
const (
	scopesListBuilds    = `"github:list-builds"`
	scopesCancelBuilds  = `"github:cancel-builds:<owner>:<repo>"`
	scopesBadge         = `"github:get-badge:<owner>:<repo>:<branch>"`
	scopesRepository    = `"github:get-repository:<owner>:<repo>"`
	scopesLatest        = `"github:latest-status:<owner>:<repo>:<branch>"`
	scopesCreateStatus  = `"github:create-status:<owner>/<repo>"`
	scopesCreateComment = `"github:create-comment:<owner>/<repo>"`
)

// Deps are what the Github API's routes need: the service they serve,
// and its version and start for the health routes.
type Deps struct {
	Service *Service
	Version string
	Started time.Time
}

// Routes returns the Github API routes.
func Routes(d Deps) []api.Route {
	s := d.Service
	p := func(path string) []string { return []string{BasePath + path} }
	routes := append(api.ServiceHealthRoutes(BasePath, d.Started, d.Version), []api.Route{
		// A delivery is read raw (its signature covers its bytes), as
		// large as any body.
		{Name: "githubWebHookConsumer", Method: http.MethodPost, Paths: p("/github"), Handle: s.webhook,
			BodyLimits: &api.DefaultBodyLimits, CleanPayloadFunc: func([]byte) []byte { return []byte(`{}`) }},
		{Name: "builds", Method: http.MethodGet, Paths: p("/builds"),
			Query:  []string{"continuationToken", "limit", "organization", "repository", "sha", "pullRequest"},
			Scopes: scopesListBuilds, EarlyScopes: true, Handle: s.builds},
		{Name: "cancelBuilds", Method: http.MethodPost, Paths: p("/builds/{owner}/{repo}/cancel"), Query: []string{"sha", "pullRequest"},
			Scopes: scopesCancelBuilds, EarlyScopes: true, Handle: s.cancelBuilds},
		{Name: "badge", Method: http.MethodGet, Paths: p("/repository/{owner}/{repo}/{branch}/badge.svg"),
			Scopes: scopesBadge, EarlyScopes: true, Handle: s.badge},
		{Name: "repository", Method: http.MethodGet, Paths: p("/repository/{owner}/{repo}"),
			Scopes: scopesRepository, EarlyScopes: true, Handle: s.repository},
		{Name: "latest", Method: http.MethodGet, Paths: p("/repository/{owner}/{repo}/{branch}/latest"),
			Scopes: scopesLatest, EarlyScopes: true, Handle: s.latest},
		{Name: "createStatus", Method: http.MethodPost, Paths: p("/repository/{owner}/{repo}/statuses/{sha}"), Input: "github-create-status-request",
			Scopes: scopesCreateStatus, EarlyScopes: true, Handle: s.createStatus},
		{Name: "createComment", Method: http.MethodPost, Paths: p("/repository/{owner}/{repo}/issues/{number}/comments"), Input: "github-create-comment-request",
			Scopes: scopesCreateComment, EarlyScopes: true, Handle: s.createComment},
		{Name: "renderTaskclusterYml", Method: http.MethodPost, Paths: p("/taskcluster-yml"), Input: "github-render-taskcluster-yml-request",
			Handle: s.renderTaskclusterYml},
	}...)
	return append(routes, deliveryRoutes(s)...)
}

// kick tells the duties there is work.
func (s *Service) kick() {
	if s.Kick != nil {
		s.Kick()
	}
}

// groupURL is the console page of a task group.
func (s *Service) groupURL(taskGroupID string) string {
	return s.RootURL + "/ui/#/group/" + taskGroupID
}

// deliveryURL is the console page of a delivery (its whole error, read
// from the delivery's record), which error statuses link to.
func (s *Service) deliveryURL(host, id string) string {
	return s.RootURL + "/ui/#/delivery/" + url.PathEscape(host) + "/" + url.PathEscape(id)
}
