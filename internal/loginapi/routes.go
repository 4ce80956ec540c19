// Package loginapi is the login service's HTTP skin under /login/ (as
// Taskcluster's web-server serves it): the configured providers, the
// OpenID Connect code flow with PKCE, state and nonce, and the session
// from which the console takes temporary credentials (package login holds
// the rules; store.LoginStore the rows).
package loginapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the login service is served.
const BasePath = "/login"

// IssueFunc signs temporary credentials named clientID with scopes.
type IssueFunc func(clientID string, scopes []string, start, expiry time.Time) (auth.Credentials, error)

// Store is the rows the login service keeps.
type Store interface {
	store.LoginStore
	store.LoginIdentityStore
}

// Sealer encrypts what the store keeps of a provider's grant, bound to
// the identity it belongs to (auth.Sealer, keyed by the server secret).
type Sealer interface {
	Seal(plaintext, associated string) (string, error)
	Open(sealed, associated string) (string, error)
}

// Options is what the login service needs.
type Options struct {
	Store Store
	// Sealer seals the providers' grants the credential scanner asks
	// with; nil keeps none (the scanner then goes by the roles of the
	// last sign-in).
	Sealer Sealer
	Config *login.Config
	// RootURL is the deployment's public URL (the providers send people
	// back to RootURL/login/<provider>/callback).
	RootURL string
	Clock   interface{ Now() time.Time }
	Issue   IssueFunc
	// Expand expands scopes through the roles: a website's credentials
	// are the person's expanded scopes within those consented to.
	Expand  ExpandFunc
	Logger  *slog.Logger
	Version string
	// HTTPClient reaches the providers (nil: a client with a timeout).
	HTTPClient *http.Client
}

// Server serves the login service.
type Server struct {
	d        Options
	lifetime time.Duration
	secure   bool // cookies only over https
	origin   string

	mu        sync.Mutex
	providers map[string]*oidc.Provider // discovered, by name
}

// New checks the configuration and builds the service. Providers are
// discovered at first use, so one that is down does not stop the server.
func New(d Options) (*Server, error) {
	lifetime, err := d.Config.Lifetime()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(d.RootURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("login: the root URL %q is not a URL", d.RootURL)
	}
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: 20 * time.Second}
	}
	return &Server{d: d, lifetime: lifetime, secure: u.Scheme == "https", origin: u.Scheme + "://" + u.Host,
		providers: map[string]*oidc.Provider{}}, nil
}

// callbackQuery is what providers send back (RFC 6749 §4.1.2, RFC 9207's
// iss, OpenID session management's session_state).
var callbackQuery = []string{"code", "state", "error", "error_description", "error_uri", "iss", "session_state", "scope"}

// Deps is what the route table serves: the service New built (its
// configuration is checked there, where a mistake can be answered).
type Deps struct {
	Server *Server
}

// Routes is the service's route table.
func Routes(d Deps) []api.Route {
	return d.Server.routes()
}

func (s *Server) routes() []api.Route {
	started := s.d.Clock.Now()
	routes := append(api.ServiceHealthRoutes(BasePath+"/v1", started, s.d.Version), s.cliRoutes()...)
	routes = append(routes, s.deviceRoutes()...)
	routes = append(routes,
		api.Route{Name: "loginProviders", Method: http.MethodGet, Paths: []string{BasePath + "/providers"}, Handle: s.listProviders},
		api.Route{Name: "loginCredentials", Method: http.MethodPost, Paths: []string{BasePath + "/credentials"}, Handle: s.credentials},
		api.Route{Name: "logout", Method: http.MethodPost, Paths: []string{BasePath + "/logout"}, Handle: s.logout})
	routes = append(routes, s.oauthRoutes()...)
	return append(routes,
		api.Route{Name: "loginStart", Method: http.MethodGet, Paths: []string{BasePath + "/{provider}"}, Query: []string{"returnTo"}, Handle: s.start},
		api.Route{Name: "loginCallback", Method: http.MethodGet, Paths: []string{BasePath + "/{provider}/callback"}, Query: callbackQuery, Handle: s.callback},
	)
}

type providerInfo struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	DisplayName string `json:"displayName"`
	SignInURL   string `json:"signInUrl"`
}

func (s *Server) listProviders(c *api.Call) (any, error) {
	out := []providerInfo{}
	for _, p := range s.d.Config.Providers {
		out = append(out, providerInfo{Name: p.Name, Kind: p.Kind, DisplayName: p.DisplayName, SignInURL: BasePath + "/" + p.Name})
	}
	return map[string]any{"providers": out}, nil
}

// discover returns the provider's discovered configuration, fetching it
// the first time (and again after a failure).
func (s *Server) discover(ctx context.Context, p *login.Provider) (*oidc.Provider, error) {
	s.mu.Lock()
	op := s.providers[p.Name]
	s.mu.Unlock()
	if op != nil {
		return op, nil
	}
	op, err := oidc.NewProvider(oidc.ClientContext(ctx, s.d.HTTPClient), p.Issuer)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.providers[p.Name] = op
	s.mu.Unlock()
	return op, nil
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hashOf is how secrets the browser holds are keyed in the store.
func hashOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// safeReturn keeps returnTo to a path of this site ("/ui/..."), never
// another origin ("//evil", "/\evil", "https://...").
func safeReturn(returnTo string) string {
	if returnTo == "" || !strings.HasPrefix(returnTo, "/") || strings.HasPrefix(returnTo, "//") || strings.ContainsAny(returnTo, "\\\r\n") {
		return "/ui/"
	}
	return returnTo
}
