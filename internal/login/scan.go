package login

import (
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
)

// Scanner defaults.
const (
	// DefaultScanInterval is how often the credential scanner checks the
	// clients made for people against what they may do now.
	DefaultScanInterval = 15 * time.Minute
	// ScanLease names the scanner's lease: one replica scans at a time.
	ScanLease = "login-scanner"
)

// IdentityOfClient is the login identity a client was made for, as
// Taskcluster's identityFromClientId reads it: a client named
// <provider>/<user> or <provider>/<user>/<anything> belongs to the person
// <provider>/<user>, if provider is one of providers. Other clients
// belong to nobody (false).
func IdentityOfClient(clientID string, providers func(string) bool) (string, bool) {
	provider, rest, ok := strings.Cut(clientID, "/")
	if !ok || rest == "" || !providers(provider) {
		return "", false
	}
	user, _, _ := strings.Cut(rest, "/")
	if user == "" {
		return "", false
	}
	return provider + "/" + user, true
}

// Exceeds reports whether a client's expanded scopes ask for more than
// the person's expanded scopes grant: then the scanner disables it, as
// Taskcluster's scanner does.
func Exceeds(person, client []string) bool {
	for _, s := range client {
		if !auth.SetSatisfies(person, s) {
			return true
		}
	}
	return false
}
