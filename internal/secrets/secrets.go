// Package secrets holds the rules of hopper's Secrets service (Taskcluster's
// Secrets API v1): a secret is a JSON object stored under a name, sealed
// with the server key, readable until it expires. The package is plain Go
// with no I/O: the store keeps sealed values, the HTTP skin (package
// secretsapi) checks scopes and answers.
package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sealer encrypts values at rest; auth.Sealer (AES-256-GCM with the server
// key) implements it.
type Sealer interface {
	Seal(plaintext, associated string) (string, error)
	Open(sealed, associated string) (string, error)
}

// associatedData binds a sealed value to its secret's name, so a value
// cannot be moved to another secret's row, nor a sealed client access
// token (bound to its clientId, which never contains a space) be read as
// a secret.
func associatedData(name string) string { return "secrets/v1 " + name }

// Secret is a stored secret: its value only ever travels sealed.
type Secret struct {
	Name string
	// Sealed is the encrypted JSON object.
	Sealed  string
	Expires time.Time
}

// Readable reports whether a secret expiring at expires may still be read
// at now: up to and including its expiry instant, as Taskcluster's.
// Expired secrets answer 404 "Secret not found" and are left out of lists
// until data expiry removes them.
func Readable(expires, now time.Time) bool { return !expires.Before(now) }

// ErrNotObject is returned for a value that is not a JSON object.
var ErrNotObject = errors.New("a secret must be a JSON object")

// Seal returns the secret named name holding value (a JSON object) until
// expires, with its value sealed.
func Seal(s Sealer, name string, value json.RawMessage, expires time.Time) (*Secret, error) {
	trimmed := bytes.TrimSpace(value)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, ErrNotObject
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, trimmed); err != nil {
		return nil, ErrNotObject
	}
	sealed, err := s.Seal(compact.String(), associatedData(name))
	if err != nil {
		// The error of a sealer never holds the plaintext.
		return nil, fmt.Errorf("sealing secret %q: %w", name, err)
	}
	return &Secret{Name: name, Sealed: sealed, Expires: expires}, nil
}

// Open returns the secret's value.
func Open(s Sealer, sec *Secret) (json.RawMessage, error) {
	plain, err := s.Open(sec.Sealed, associatedData(sec.Name))
	if err != nil {
		return nil, fmt.Errorf("opening secret %q: %w", sec.Name, err)
	}
	return json.RawMessage(plain), nil
}
