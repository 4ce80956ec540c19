package auth

import (
	"crypto/subtle"
	"slices"
	"sync"
	"time"
)

// maxCachedCredentials bounds the verified-credentials cache. An entry is a
// few kilobytes (the ext attribute dominates); a busy queue has one live
// entry per claimed run and per client in use.
const maxCachedCredentials = 4096

// credentialCache remembers the outcome of resolving a Hawk id and ext
// into a key and scopes (ext decoding, certificate validation, its two
// HMACs, the issuer's scope checks and the role expansions), so the many
// calls a worker makes with one claim's credentials pay for it once.
//
// An entry is only reused while everything it was computed from is
// unchanged: the issuing client's access token and stored scopes and the
// role expander (a new role set is a new Expander). The client itself is
// still looked up on every request, so a deleted, disabled or expired
// issuer fails as before, and the certificate's start and expiry are
// checked against the current time on every request. Entries are added
// only after a request's MAC verified, so unauthenticated callers cannot
// fill the cache.
type credentialCache struct {
	mu      sync.Mutex
	entries map[credentialKey]*cachedCredentials
}

type credentialKey struct{ id, ext string }

// cachedCredentials is a successful resolution of a credentialKey.
type cachedCredentials struct {
	// issuing is the clientId whose token signs: the certificate's
	// issuer for named temporary credentials, else the Hawk id.
	issuing string
	// The inputs the resolution depends on besides id and ext.
	issuerToken  string
	issuerScopes []string
	expander     *Expander

	// key is the Hawk key (the derived key of temporary credentials).
	key string
	// scopes are the final scopes, anonymous role included.
	scopes []string
	// hasCert says whether a certificate applied; certStart and certExpiry
	// are then its bounds in milliseconds, certExpires its expiry as a
	// time.
	hasCert               bool
	certStart, certExpiry float64
	certExpires           time.Time
}

func newCredentialCache() *credentialCache {
	return &credentialCache{entries: map[credentialKey]*cachedCredentials{}}
}

func (c *credentialCache) get(id, ext string) *cachedCredentials {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[credentialKey{id: id, ext: ext}]
}

func (c *credentialCache) put(id, ext string, entry *cachedCredentials) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := credentialKey{id: id, ext: ext}
	if _, ok := c.entries[k]; !ok && len(c.entries) >= maxCachedCredentials {
		// Evict an arbitrary entry (map iteration order is randomized):
		// cheap, and good enough for a working set that turns over as
		// claims come and go.
		for old := range c.entries {
			delete(c.entries, old)
			break
		}
	}
	c.entries[k] = entry
}

// validFor reports whether the entry was computed from the current state
// of the issuing client and the current role set.
func (e *cachedCredentials) validFor(client Client, expander *Expander) bool {
	return e.expander == expander &&
		subtle.ConstantTimeCompare([]byte(e.issuerToken), []byte(client.AccessToken)) == 1 &&
		slices.Equal(e.issuerScopes, client.Scopes)
}

// credentials returns the entry's credentials for a request at now, made
// by the Hawk id id with the (current) issuing client. The certificate's
// time checks are the only ones of the full resolution that can change
// outcome for the same inputs, and they run in the same order.
func (e *cachedCredentials) credentials(id string, client Client, now time.Time) (*loadedCredentials, error) {
	c := &loadedCredentials{
		clientID: id,
		issuer:   e.issuing,
		key:      e.key,
		// A copy: callers own the Result's scopes.
		scopes:  slices.Clone(e.scopes),
		expires: client.Expires,
	}
	if e.hasCert {
		if err := checkCertificateTimes(e.certStart, e.certExpiry, now); err != nil {
			return nil, err
		}
		if e.certExpires.Before(c.expires) {
			c.expires = e.certExpires
		}
	}
	return c, nil
}
