package loginapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/store"
)

// ScanStore is what the credential scanner reads and changes: the
// people, the clients made for them, and the lease that lets one replica
// scan at a time.
type ScanStore interface {
	Store
	ListClients(ctx context.Context, prefix string, page store.Page) ([]store.Client, string, error)
	UpdateClient(ctx context.Context, clientID string, fn func(*store.Client) error, audit *store.Audit) (*store.Client, error)
	TakeLease(ctx context.Context, p store.TakeLeaseParams) (bool, error)
}

// auditDisabled is the audit log's action for a disabled client, as
// Taskcluster's auth service names it.
const auditDisabled = "client disabled"

// Scanner is Taskcluster's credential scanner: for every enabled client
// made for a person (named <provider>/<user> or <provider>/<user>/…) it
// asks the person's provider who they are now, and disables the client
// when its expanded scopes exceed what that person's expanded scopes
// grant now (removed from a team), or when the provider no longer knows
// them (account gone, hopper's authorization revoked). A person the
// provider cannot be asked about (down) keeps their clients until the
// next pass. Each disable is recorded in the audit log as done by Actor.
type Scanner struct {
	Server *Server
	Store  ScanStore
	Roles  auth.ExpanderSource
	// Holder names this replica in the lease; Actor is the clientId the
	// audit log names (static/taskcluster/web-server, as Taskcluster's
	// scanner calls auth.disableClient with the web-server's client).
	Holder, Actor string
	// Interval is the cadence (the configuration's scanInterval); no
	// other replica scans within it after a pass. LeaseFor is how long a
	// pass may go without renewing the lease (default DefaultScanLease).
	Interval, LeaseFor time.Duration
}

// DefaultScanLease is how long a scanning replica holds the lease between
// renewals; a replica that dies mid-pass is replaced after it.
const DefaultScanLease = 2 * time.Minute

// ScanReport says what one pass did.
type ScanReport struct {
	// Scanned is how many enabled clients of people it looked at;
	// Disabled how many it disabled; Unresolved how many it left because
	// their provider could not be asked. Skipped says another replica
	// holds the lease.
	Scanned, Disabled, Unresolved int
	Skipped                       bool
}

// person is what one pass learned of a login identity.
type person struct {
	scopes     []string // expanded
	gone       bool
	unresolved bool
}

// errUnchanged leaves a client as it is (already disabled, or no longer
// exceeding).
var errUnchanged = errors.New("unchanged")

// errLeaseLost ends a pass whose lease another replica took.
var errLeaseLost = errors.New("the credential scanner's lease was taken by another replica")

// RunOnce scans every provider's clients once, if this replica holds the
// lease.
func (sc *Scanner) RunOnce(ctx context.Context) (ScanReport, error) {
	var rep ScanReport
	leaseFor := sc.LeaseFor
	if leaseFor <= 0 {
		leaseFor = DefaultScanLease
	}
	renewed := sc.Server.d.Clock.Now()
	ok, err := sc.lease(ctx, renewed.Add(leaseFor))
	if err != nil || !ok {
		rep.Skipped = err == nil
		return rep, err
	}
	e, err := sc.Roles.Expander(ctx)
	if err != nil {
		return rep, fmt.Errorf("loading roles: %w", err)
	}
	people := map[string]*person{}
	for i := range sc.Server.d.Config.Providers {
		p := &sc.Server.d.Config.Providers[i]
		token := ""
		for {
			clients, next, err := sc.Store.ListClients(ctx, p.Name+"/", store.Page{Limit: 500, ContinuationToken: token})
			if err != nil {
				return rep, err
			}
			for _, cl := range clients {
				if now := sc.Server.d.Clock.Now(); now.Sub(renewed) > leaseFor/2 {
					if ok, err := sc.lease(ctx, now.Add(leaseFor)); err != nil || !ok {
						return rep, errors.Join(err, errLeaseLost)
					}
					renewed = now
				}
				if err := sc.check(ctx, p, cl, e, people, &rep); err != nil {
					return rep, err
				}
			}
			if token = next; token == "" {
				break
			}
		}
	}
	// Nobody else scans until the next pass is due.
	if _, err := sc.lease(ctx, sc.Server.d.Clock.Now().Add(max(sc.Interval, leaseFor))); err != nil {
		return rep, err
	}
	if rep.Disabled > 0 || rep.Unresolved > 0 {
		sc.Server.d.Logger.Info("login: credential scan", "scanned", rep.Scanned, "disabled", rep.Disabled, "unresolved", rep.Unresolved)
	}
	return rep, nil
}

func (sc *Scanner) lease(ctx context.Context, until time.Time) (bool, error) {
	return sc.Store.TakeLease(ctx, store.TakeLeaseParams{Name: login.ScanLease, Holder: sc.Holder, Now: sc.Server.d.Clock.Now(), Until: until})
}

// check looks at one client.
func (sc *Scanner) check(ctx context.Context, p *login.Provider, cl store.Client, e *auth.Expander, people map[string]*person, rep *ScanReport) error {
	identity, ok := login.IdentityOfClient(cl.ClientID, func(name string) bool { return name == p.Name })
	if !ok || cl.Disabled {
		return nil
	}
	rep.Scanned++
	who := people[identity]
	if who == nil {
		roles, err := sc.Server.current(ctx, p, identity)
		switch {
		case errors.Is(err, errGone):
			who = &person{gone: true}
			if err := sc.Store.ForgetLoginIdentity(ctx, identity); err != nil {
				return err
			}
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			sc.Server.d.Logger.Warn("login: cannot ask the provider about a person; their clients stay as they are until the next pass",
				"provider", p.Name, "identity", identity, "error", err)
			who = &person{unresolved: true}
		default:
			who = &person{scopes: e.Expand(login.Scopes(identity, roles))}
		}
		people[identity] = who
	}
	if who.unresolved {
		rep.Unresolved++
		return nil
	}
	if !who.gone && !login.Exceeds(who.scopes, e.Expand(cl.Scopes)) {
		return nil
	}
	now := sc.Server.d.Clock.Now()
	// The client is read again under its row lock: one changed since the
	// listing (narrowed, or disabled by another replica) is left alone, so
	// nothing is disabled twice or recorded twice.
	_, err := sc.Store.UpdateClient(ctx, cl.ClientID, func(c *store.Client) error {
		if c.Disabled || (!who.gone && !login.Exceeds(who.scopes, e.Expand(c.Scopes))) {
			return errUnchanged
		}
		c.Disabled, c.LastModified = true, now
		return nil
	}, &store.Audit{ClientID: sc.Actor, Action: auditDisabled, At: now})
	if errors.Is(err, errUnchanged) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rep.Disabled++
	reason := "its scopes exceed the person's"
	if who.gone {
		reason = "the provider no longer knows the person"
	}
	sc.Server.d.Logger.Info("login: client disabled", "clientId", cl.ClientID, "identity", identity, "reason", reason, "by", sc.Actor)
	return nil
}

// current asks a person's provider what their roles are now and records
// the answer: errGone when it no longer knows them (or hopper never saw
// them sign in), another error when it cannot be asked. A person whose
// provider gave nothing to ask with keeps the roles of their last
// sign-in.
func (s *Server) current(ctx context.Context, p *login.Provider, identity string) ([]string, error) {
	id, err := s.d.Store.GetLoginIdentity(ctx, identity)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errGone
	}
	if err != nil {
		return nil, err
	}
	g, err := s.openGrant(id)
	if err != nil || g == nil {
		return id.Roles, err
	}
	var who *login.Person
	var tok *oauth2.Token
	if p.Kind == login.KindGitHub {
		ts := s.githubConfig(p).TokenSource(context.WithValue(ctx, oauth2.HTTPClient, s.d.HTTPClient), g.token())
		var gh login.Person
		if gh, err = s.githubPerson(ctx, p, ts); err == nil {
			who = &gh
			tok, err = ts.Token()
		}
	} else {
		who, tok, err = s.refreshOIDC(ctx, p, g.RefreshToken)
	}
	if err != nil {
		return nil, err
	}
	roles := id.Roles // a refresh without an ID token says the account is there, not its groups
	if who != nil {
		if _, rest, _ := strings.Cut(identity, "/"); strings.SplitN(rest, "|", 2)[0] != login.Encode(who.Subject) {
			return nil, errGone // the grant answers for someone else now
		}
		roles = p.Roles(*who)
	}
	return roles, s.remember(ctx, p, identity, roles, tok, s.d.Clock.Now())
}

// refreshOIDC asks an OpenID provider about a person with their refresh
// token: a refused refresh (invalid_grant: the account or the grant is
// gone) is errGone; a new ID token (verified as at sign-in but for the
// nonce, which belongs to the sign-in) gives their groups now, and no ID
// token a nil person.
func (s *Server) refreshOIDC(ctx context.Context, p *login.Provider, refreshToken string) (*login.Person, *oauth2.Token, error) {
	op, err := s.discover(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	octx := oidc.ClientContext(ctx, s.d.HTTPClient)
	tok, err := s.oauth2Config(p, op).TokenSource(octx, &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		if refusedGrant(err) {
			return nil, nil, errGone
		}
		return nil, nil, fmt.Errorf("refreshing at %s: %w", p.Name, err)
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = refreshToken // the provider keeps the old one valid
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, tok, nil
	}
	who, r := s.verify(octx, p, op, raw, "")
	if r != nil {
		return nil, nil, fmt.Errorf("the refreshed ID token of %s: %s", p.Name, r.detail)
	}
	return &who, tok, nil
}

// refusedGrant says whether the provider refused a kept grant itself
// (RFC 6749 §5.2: invalid_grant, unauthorized_client, as Gitea answers a
// grant deleted with its account or a refresh token it no longer
// accepts; GitHub's bad_refresh_token): hopper can no longer ask about
// the person, so their clients go, as Taskcluster's scanner disables a
// person it has no token for. A refusal of hopper's own client
// (invalid_client, a wrong secret) or a provider in trouble
// (server_error) is not the person's doing, and disables nothing.
func refusedGrant(err error) bool {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return false
	}
	switch re.ErrorCode {
	case "invalid_grant", "unauthorized_client", "bad_refresh_token":
		return true
	}
	return false
}
