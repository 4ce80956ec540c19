// Package login holds the rules of the login service, which signs people
// in through OpenID Connect providers (issue 37): the operator's provider
// configuration, the login identity a person gets (Taskcluster's
// login-identity:<provider>/<user>), the roles their groups give, and the
// scopes of the temporary credentials they receive. It does no I/O beyond
// reading the configuration file and secrets it names.
package login

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Provider kinds.
const (
	// KindOIDC is any OpenID Connect provider, found by its issuer URL;
	// its groups claim (GroupsClaim) gives <name>-group:<group> roles.
	KindOIDC = "oidc"
	// KindGitea and KindForgejo are Gitea and Forgejo as OpenID providers:
	// their groups claim lists "<org>" and "<org>:<team>", which give
	// <name>-org:<org> and <name>-team:<org>/<team> roles.
	KindGitea   = "gitea"
	KindForgejo = "forgejo"
	// KindGitHub is GitHub (or GitHub Enterprise Server): OAuth2 without
	// OpenID, the person read from its REST API (/user, their teams and
	// the organizations they administer), as Taskcluster's github
	// strategy; roles <name>-team:<org>/<team> and <name>-org-admin:<org>.
	KindGitHub = "github"
)

// GitHubURL is GitHub's own address, the default of a github provider's
// baseUrl.
const GitHubURL = "https://github.com"

// Defaults.
const (
	// DefaultSessionLifetime is how long a sign-in lasts before the person
	// signs in again.
	DefaultSessionLifetime = 24 * time.Hour
	// CredentialsLifetime is how long the temporary credentials handed to
	// the console last (the console asks again while the session lasts).
	CredentialsLifetime = time.Hour
	// AttemptLifetime is how long a person may take at their provider.
	AttemptLifetime = 10 * time.Minute
)

// Config is the login section of the operator's configuration: the
// providers people sign in through.
type Config struct {
	Providers []Provider `json:"providers"`
	// SessionLifetime is a Go duration ("12h"); empty means the default.
	SessionLifetime string `json:"sessionLifetime,omitempty"`
	// RegisteredClients are the websites that may ask people for
	// credentials (Taskcluster's name; oauth.go).
	RegisteredClients []Registration `json:"registeredClients,omitempty"`
	// ScanInterval is how often the credential scanner runs, a Go
	// duration; empty means DefaultScanInterval.
	ScanInterval string `json:"scanInterval,omitempty"`
}

// Provider is one configured identity provider.
type Provider struct {
	// Name is the provider's part of login identities and role names
	// (lower-case letters, digits and dashes): login-identity:<name>/...
	Name string `json:"name"`
	// Kind is oidc, gitea or forgejo.
	Kind string `json:"kind"`
	// DisplayName is what the console's sign-in button says.
	DisplayName string `json:"displayName,omitempty"`
	// Issuer is the OpenID issuer URL, found by discovery (not for
	// github).
	Issuer string `json:"issuer,omitempty"`
	// BaseURL is a github provider's web address (default GitHubURL; a
	// GitHub Enterprise Server's own), where people authorize hopper.
	BaseURL string `json:"baseUrl,omitempty"`
	// APIURL is a github provider's REST API (default
	// https://api.github.com for GitHub, <baseUrl>/api/v3 for GitHub
	// Enterprise Server).
	APIURL   string `json:"apiUrl,omitempty"`
	ClientID string `json:"clientId"`
	// The client secret: from the file ClientSecretFile names, or the
	// environment variable ClientSecretEnv names; never inline, so the
	// configuration file can be shown and logged.
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	ClientSecretEnv  string `json:"clientSecretEnv,omitempty"`
	// Scopes asked for besides openid (default: profile email, and groups
	// for Gitea and Forgejo).
	Scopes []string `json:"scopes,omitempty"`
	// GroupsClaim names the ID token claim listing the person's groups
	// (default "groups"; "" with kind oidc and no groups scope: none).
	GroupsClaim string `json:"groupsClaim,omitempty"`
	// UsernameClaim names the claim of the readable user name (default
	// preferred_username).
	UsernameClaim string `json:"usernameClaim,omitempty"`
	// RequireVerifiedEmail refuses a person whose email_verified is not
	// true.
	RequireVerifiedEmail bool `json:"requireVerifiedEmail,omitempty"`

	// ClientSecret is read from the file or environment (never logged).
	ClientSecret string `json:"-"`
}

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,37}$`)

// ParseConfig reads the configuration (JSON) and the secrets it names,
// with getenv for the environment.
func ParseConfig(data []byte, getenv func(string) string) (*Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("login configuration: %w", err)
	}
	if _, err := c.Lifetime(); err != nil {
		return nil, err
	}
	if _, err := c.ScanEvery(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range c.Providers {
		p := &c.Providers[i]
		if err := p.check(getenv); err != nil {
			return nil, fmt.Errorf("login configuration: provider %q: %w", p.Name, err)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("login configuration: two providers are named %q", p.Name)
		}
		seen[p.Name] = true
	}
	sites := map[string]bool{}
	for i := range c.RegisteredClients {
		r := &c.RegisteredClients[i]
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("login configuration: %w", err)
		}
		if sites[r.ClientID] {
			return nil, fmt.Errorf("login configuration: two registered clients are named %q", r.ClientID)
		}
		sites[r.ClientID] = true
	}
	return &c, nil
}

// LoadConfig reads the configuration file at path.
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the login configuration: %w", err)
	}
	return ParseConfig(b, getenv)
}

// Lifetime is the session lifetime.
func (c *Config) Lifetime() (time.Duration, error) {
	if c.SessionLifetime == "" {
		return DefaultSessionLifetime, nil
	}
	d, err := time.ParseDuration(c.SessionLifetime)
	if err != nil || d <= 0 || d > 31*24*time.Hour {
		return 0, fmt.Errorf("login configuration: sessionLifetime %q is not a duration of at most 31 days", c.SessionLifetime)
	}
	return d, nil
}

// ScanEvery is the credential scanner's interval.
func (c *Config) ScanEvery() (time.Duration, error) {
	if c.ScanInterval == "" {
		return DefaultScanInterval, nil
	}
	d, err := time.ParseDuration(c.ScanInterval)
	if err != nil || d < 10*time.Second || d > 24*time.Hour {
		return 0, fmt.Errorf("login configuration: scanInterval %q is not a duration between 10s and 24h", c.ScanInterval)
	}
	return d, nil
}

// Provider finds a configured provider by name.
func (c *Config) Provider(name string) (*Provider, bool) {
	for i := range c.Providers {
		if c.Providers[i].Name == name {
			return &c.Providers[i], true
		}
	}
	return nil, false
}

func (p *Provider) check(getenv func(string) string) error {
	if !providerName.MatchString(p.Name) {
		return errors.New("name must be 1–38 lower-case letters, digits and dashes")
	}
	switch p.Kind {
	case KindOIDC, KindGitea, KindForgejo:
		if !httpURL(p.Issuer) {
			return fmt.Errorf("issuer %q is not an http(s) URL", p.Issuer)
		}
		if p.BaseURL != "" || p.APIURL != "" {
			return errors.New("baseUrl and apiUrl are for github providers; OpenID providers are found by their issuer")
		}
	case KindGitHub:
		if err := p.checkGitHub(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("kind %q is not one of oidc, gitea, forgejo, github", p.Kind)
	}
	if p.ClientID == "" {
		return errors.New("clientId is required")
	}
	switch {
	case p.ClientSecretFile != "" && p.ClientSecretEnv != "":
		return errors.New("name the client secret's file or its environment variable, not both")
	case p.ClientSecretFile != "":
		b, err := os.ReadFile(p.ClientSecretFile)
		if err != nil {
			return fmt.Errorf("reading clientSecretFile: %w", err)
		}
		p.ClientSecret = strings.TrimSpace(string(b))
	case p.ClientSecretEnv != "":
		p.ClientSecret = getenv(p.ClientSecretEnv)
		if p.ClientSecret == "" {
			return fmt.Errorf("the environment variable %s (clientSecretEnv) is empty", p.ClientSecretEnv)
		}
	}
	if p.DisplayName == "" {
		p.DisplayName = p.Name
	}
	if p.UsernameClaim == "" {
		p.UsernameClaim = "preferred_username"
	}
	if p.Kind == KindGitHub {
		return nil
	}
	if p.Scopes == nil {
		p.Scopes = []string{"profile", "email"}
		if p.Kind != KindOIDC {
			p.Scopes = append(p.Scopes, "groups")
		}
	}
	if p.GroupsClaim == "" && (p.Kind != KindOIDC || contains(p.Scopes, "groups")) {
		p.GroupsClaim = "groups"
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}

// checkGitHub fills in a github provider's addresses and scopes: read:org
// lets hopper list the person's teams and organization memberships, and
// user:email their verified addresses where the configuration requires
// one.
func (p *Provider) checkGitHub() error {
	if p.Issuer != "" {
		return errors.New("a github provider has no issuer (GitHub is not an OpenID provider): name GitHub Enterprise Server by baseUrl")
	}
	if p.BaseURL == "" {
		p.BaseURL = GitHubURL
	}
	p.BaseURL = strings.TrimSuffix(p.BaseURL, "/")
	if !httpURL(p.BaseURL) {
		return fmt.Errorf("baseUrl %q is not an http(s) URL", p.BaseURL)
	}
	if p.APIURL == "" {
		p.APIURL = p.BaseURL + "/api/v3"
		if p.BaseURL == GitHubURL {
			p.APIURL = "https://api.github.com"
		}
	}
	p.APIURL = strings.TrimSuffix(p.APIURL, "/")
	if !httpURL(p.APIURL) {
		return fmt.Errorf("apiUrl %q is not an http(s) URL", p.APIURL)
	}
	if p.GroupsClaim != "" || p.UsernameClaim != "" {
		return errors.New("groupsClaim and usernameClaim are for OpenID providers; GitHub's teams come from its API")
	}
	if p.Scopes == nil {
		p.Scopes = []string{"read:org"}
		if p.RequireVerifiedEmail {
			p.Scopes = append(p.Scopes, "user:email")
		}
	}
	return nil
}
