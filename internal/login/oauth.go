package login

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
)

// Third-party websites (Taskcluster's web-server registeredClients): an
// operator registers a site, which sends people to /login/oauth/authorize;
// after their consent it trades the code for an access token and the
// token for Taskcluster credentials no wider than the person's scopes and
// the registration's.
const (
	// CodeLifetime is how long a site has to trade a code (RFC 6749
	// §4.1.2 recommends at most ten minutes; Taskcluster uses ten).
	CodeLifetime = 10 * time.Minute
	// DefaultMaxExpires is how long a grant lasts when the registration
	// says nothing (Taskcluster's registrations say it; its examples use
	// a day).
	DefaultMaxExpires = 24 * time.Hour
	// MaxGrant bounds any registration's maxExpires: temporary
	// credentials last at most 31 days in Taskcluster.
	MaxGrant = 31 * 24 * time.Hour
)

// Registration is one website allowed to ask people for credentials.
type Registration struct {
	// ClientID names the site in its requests (OAuth2's client_id).
	ClientID string `json:"clientId"`
	// Description is what the consent page says about the site.
	Description string `json:"description,omitempty"`
	// RedirectURI lists the site's callbacks, compared exactly; any other
	// is refused before anything else.
	RedirectURI []string `json:"redirectUri"`
	// Scope is the most the site may ask for.
	Scope []string `json:"scope"`
	// Whitelisted sites that ask for exactly Scope skip the consent page
	// (the operator consented for everyone).
	Whitelisted bool `json:"whitelisted,omitempty"`
	// MaxExpires is the longest a grant lasts ("1 day", "12h"; default
	// DefaultMaxExpires).
	MaxExpires string `json:"maxExpires,omitempty"`
}

var registrationID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (r *Registration) check() error {
	if !registrationID.MatchString(r.ClientID) {
		return fmt.Errorf("registered client %q: clientId must be 1–64 letters, digits, dots, dashes and underscores", r.ClientID)
	}
	if len(r.RedirectURI) == 0 {
		return fmt.Errorf("registered client %q: redirectUri lists no callback", r.ClientID)
	}
	for _, u := range r.RedirectURI {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" || p.Fragment != "" || (p.Scheme != "https" && !(p.Scheme == "http" && loopback(p.Hostname()))) {
			return fmt.Errorf("registered client %q: redirect URI %q must be an https URL without fragment (http only on this machine)", r.ClientID, u)
		}
	}
	if len(r.Scope) == 0 || !auth.ValidScopes(r.Scope) {
		return fmt.Errorf("registered client %q: scope must list valid scopes", r.ClientID)
	}
	if _, err := r.maxLifetime(); err != nil {
		return fmt.Errorf("registered client %q: %w", r.ClientID, err)
	}
	return nil
}

// maxLifetime is the registration's maxExpires.
func (r *Registration) maxLifetime() (time.Duration, error) {
	if r.MaxExpires == "" {
		return DefaultMaxExpires, nil
	}
	d, err := ParseDuration(r.MaxExpires)
	if err != nil || d > MaxGrant {
		return 0, fmt.Errorf("maxExpires %q is not a duration of at most 31 days", r.MaxExpires)
	}
	return d, nil
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// Registration finds a registered website by its client ID.
func (c *Config) Registration(clientID string) (*Registration, bool) {
	for i := range c.RegisteredClients {
		if c.RegisteredClients[i].ClientID == clientID {
			return &c.RegisteredClients[i], true
		}
	}
	return nil, false
}

// AllowsRedirect reports whether uri is one of the site's callbacks,
// exactly (RFC 6749 §3.1.2.3: no prefix or pattern matching).
func (r *Registration) AllowsRedirect(uri string) bool {
	return slices.Contains(r.RedirectURI, uri)
}

// CheckScopes says why a site may not ask for scopes (nil when it may):
// each must be within the registration's, and a whitelisted site that
// skips consent must ask for exactly them.
func (r *Registration) CheckScopes(scopes []string) error {
	if len(scopes) == 0 {
		return errors.New("the site asked for no scopes")
	}
	if !auth.ValidScopes(scopes) {
		return errors.New("the site asked for a scope that is not valid")
	}
	for _, s := range scopes {
		if !auth.SetSatisfies(r.Scope, s) {
			return fmt.Errorf("the site may not ask for %q", s)
		}
	}
	return nil
}

// SkipsConsent reports whether the site is whitelisted and asks for
// exactly its registered scopes (Taskcluster's rule).
func (r *Registration) SkipsConsent(scopes []string) bool {
	return r.Whitelisted && slices.Equal(auth.Normalize(scopes), auth.Normalize(r.Scope))
}

// GrantLifetime is how long a grant lasts when the site asks for asked
// ("" for the most): at most the registration's maxExpires; a request
// that cannot be read gets the most, as in Taskcluster.
func (r *Registration) GrantLifetime(asked string) time.Duration {
	most, err := r.maxLifetime()
	if err != nil {
		most = DefaultMaxExpires // ParseConfig refused it; a literal Config may not have
	}
	if asked == "" {
		return most
	}
	d, err := ParseDuration(asked)
	if err != nil || d <= 0 || d > most {
		return most
	}
	return d
}

var durationWords = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseDuration reads a duration as Go writes it ("12h30m") or as
// Taskcluster's fromNow does ("1 day", "2 hours 30 minutes", "3d").
func ParseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	fields := strings.Fields(strings.ToLower(s))
	var total time.Duration
	for i := 0; i < len(fields); i++ {
		num, unit := fields[i], ""
		if j := strings.IndexFunc(num, func(r rune) bool { return r < '0' || r > '9' }); j > 0 {
			num, unit = num[:j], num[j:]
		} else if i+1 < len(fields) {
			i++
			unit = fields[i]
		}
		n, err := strconv.Atoi(num)
		per, ok := durationWords[unit]
		if err != nil || !ok || n <= 0 || n > 10000 {
			return 0, fmt.Errorf("%q is not a duration", s)
		}
		total += time.Duration(n) * per
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	return total, nil
}

// Intersect is the scopes both sets satisfy (Taskcluster's
// scopeIntersection): a scope of wanted that held satisfies, and each
// scope of held that is narrower than one of wanted. held is expanded.
func Intersect(held, wanted []string) []string {
	var out []string
	for _, w := range wanted {
		if auth.SetSatisfies(held, w) {
			out = append(out, w)
			continue
		}
		for _, h := range held {
			if auth.ScopeSatisfies(w, h) {
				out = append(out, h)
			}
		}
	}
	return auth.Normalize(out)
}
