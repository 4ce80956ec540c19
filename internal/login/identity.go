package login

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Person is who a provider says signed in.
type Person struct {
	// Subject is the provider's stable id (the ID token's sub).
	Subject string
	// Username is the readable name (may be empty).
	Username string
	// Groups are the provider's groups claim.
	Groups []string
}

// Identity is the login identity of a person signed in through p:
// <name>/<subject>|<username>, encoded as Taskcluster's web-server encodes
// it (its decode reads it back), so it is a valid clientId. The subject
// comes first because it never changes; the name is for people to read.
func (p *Provider) Identity(who Person) (string, error) {
	if who.Subject == "" {
		return "", errors.New("the provider named no subject")
	}
	id := p.Name + "/" + Encode(who.Subject)
	if who.Username != "" {
		id += "|" + Encode(who.Username)
	}
	return id, nil
}

// Encode escapes every character outside A-Z a-z 0-9 ! @ : . + _ - as
// !XX per UTF-8 byte (and ! itself as !21), as Taskcluster's web-server
// does for the parts of a login identity. Unlike it, | is escaped too,
// so the separator between subject and name stays unambiguous.
func Encode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9',
			c == '@', c == ':', c == '.', c == '+', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "!%02X", c)
		}
	}
	return b.String()
}

// Roles are the roles a person's groups give (docs/login.md):
//   - gitea, forgejo: "<org>" gives <name>-org:<org> and "<org>:<team>"
//     gives <name>-team:<org>/<team>, the shape of Taskcluster's GitHub
//     strategy's github-team:<org>/<team>;
//   - github: "<org>:<team>" (a team, by its slug) gives
//     <name>-team:<org>/<team> and "<org>" (an organization the person
//     administers) gives <name>-org-admin:<org>, Taskcluster's
//     github-team and github-org-admin roles;
//   - oidc: each group g gives <name>-group:<g>.
//
// Sorted, without duplicates.
func (p *Provider) Roles(who Person) []string {
	set := map[string]bool{}
	for _, g := range who.Groups {
		if !scopeText(g) {
			continue
		}
		switch p.Kind {
		case KindGitHub:
			if org, team, ok := strings.Cut(g, ":"); ok {
				set[p.Name+"-team:"+org+"/"+team] = true
			} else {
				set[p.Name+"-org-admin:"+g] = true
			}
		case KindGitea, KindForgejo:
			if org, team, ok := strings.Cut(g, ":"); ok {
				set[p.Name+"-team:"+org+"/"+team] = true
			} else {
				set[p.Name+"-org:"+g] = true
			}
		default:
			set[p.Name+"-group:"+g] = true
		}
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// scopeText reports whether a group can be part of a scope: Taskcluster's
// scopes are printable ASCII, so a group with other characters gives no
// role (rather than credentials the server would refuse).
func scopeText(g string) bool {
	if g == "" {
		return false
	}
	for i := 0; i < len(g); i++ {
		if g[i] < 0x20 || g[i] > 0x7e {
			return false
		}
	}
	return true
}

// Scopes are the scopes of a signed-in person's credentials: assume:
// their login identity (the login-identity:* role decides what each
// person gets) and each of their roles, as Taskcluster's web-server.
func Scopes(identity string, roles []string) []string {
	out := make([]string, 0, len(roles)+1)
	out = append(out, "assume:login-identity:"+identity)
	for _, r := range roles {
		out = append(out, "assume:"+r)
	}
	return out
}
