package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// IDs returns the slugid source of one delivery: each label maps to a v4
// slugid derived from a server secret, the forge and the delivery id, so
// processing a delivery again (after a crash, on another replica)
// renders the very same task ids and createTask calls, which the queue
// takes as the same tasks, while nobody without the secret can predict
// them.
func IDs(secret []byte, host, deliveryID string) func(label string) string {
	return func(label string) string {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(host + "\x00" + deliveryID + "\x00" + label))
		sum := mac.Sum(nil)
		var u [16]byte
		copy(u[:], sum)
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		u[0] &= 0x7f            // a "nice" slugid starts with a letter or digit
		return base64.RawURLEncoding.EncodeToString(u[:])
	}
}
