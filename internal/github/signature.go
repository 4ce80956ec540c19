package github

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
)

// Signature is the MAC a delivery carries, as read from its headers.
type Signature struct {
	// Algorithm is "sha256" or "sha1" (old GitHub Enterprise).
	Algorithm string
	MAC       []byte
}

// ReadSignature returns the strongest signature the headers carry:
// GitHub's X-Hub-Signature-256 ("sha256=<hex>"), Gitea's and Forgejo's
// own headers (bare hex SHA-256), or X-Hub-Signature ("sha1=<hex>"). ok
// is false when there is none; a malformed one is returned with an empty
// MAC, which matches no secret.
func ReadSignature(h http.Header) (Signature, bool) {
	if v := h.Get("X-Hub-Signature-256"); v != "" {
		return Signature{Algorithm: "sha256", MAC: decodeHex(strings.TrimPrefix(v, "sha256="))}, true
	}
	for _, name := range []string{"X-Gitea-Signature", "X-Forgejo-Signature", "X-Gogs-Signature"} {
		if v := h.Get(name); v != "" {
			return Signature{Algorithm: "sha256", MAC: decodeHex(v)}, true
		}
	}
	if v := h.Get("X-Hub-Signature"); v != "" {
		return Signature{Algorithm: "sha1", MAC: decodeHex(strings.TrimPrefix(v, "sha1="))}, true
	}
	return Signature{}, false
}

func decodeHex(s string) []byte {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return b
}

// Matches reports whether the signature is the HMAC of the raw body under
// secret, compared in constant time. The raw bytes are what the forge
// signed: Taskcluster re-serialises the parsed body first, which breaks
// for Gitea's indented deliveries.
func (s Signature) Matches(secret, body []byte) bool {
	if len(s.MAC) == 0 || len(secret) == 0 {
		return false
	}
	var newHash func() hash.Hash
	switch s.Algorithm {
	case "sha256":
		newHash = sha256.New
	case "sha1":
		newHash = sha1.New
	default:
		return false
	}
	mac := hmac.New(newHash, secret)
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), s.MAC)
}

// Sign returns the X-Hub-Signature-256 value of body under secret (for
// tests and tools that deliver webhooks).
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
