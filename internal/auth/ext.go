package auth

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// decodeExt decodes the ext attribute of a request by id, if any, and
// returns the clientId whose token signs (the certificate's issuer for
// named temporary credentials, else id) with the decoded object (nil if
// ext is absent or not an object).
func decodeExt(id, ext string) (issuing string, extObj map[string]any, err error) {
	if ext == "" {
		return id, nil, nil
	}
	parsed, err := parseExt(ext)
	if err != nil {
		return "", nil, err
	}
	extObj, _ = parsed.(map[string]any)
	if cert, ok := extObj["certificate"].(map[string]any); ok && truthy(cert["issuer"]) {
		issuer, ok := cert["issuer"].(string)
		if !ok {
			return "", nil, authFail("ext.certificate.issuer must be a string")
		}
		if issuer == id {
			return "", nil, authFail("ext.certificate.issuer must differ from the supplied clientId")
		}
		return issuer, extObj, nil
	}
	return id, extObj, nil
}

// withAnonymous returns a copy of scopes plus the anonymous role's scope
// (a copy, so a caller's backing array is never written).
func withAnonymous(scopes []string) []string {
	return append(slices.Clip(scopes), anonymousScope)
}

// parseExt decodes the ext attribute: base64 (decoded leniently, like
// Node's Buffer) of UTF-8 JSON.
func parseExt(ext string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(nodeBase64Decode(ext)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, authFail("Failed to parse ext")
	}
	if v == nil {
		// JSON "null" parses, but Taskcluster then dereferences it.
		return nil, authFail("Cannot read properties of null (reading 'certificate')")
	}
	return v, nil
}

// applyExt applies a certificate and authorizedScopes to c.
func (c *loadedCredentials) applyExt(name, issuing string, ext map[string]any, now time.Time, e *Expander) error {
	if raw := ext["certificate"]; truthy(raw) {
		if err := c.applyCertificate(name, issuing, raw, now); err != nil {
			return err
		}
	}
	if raw := ext["authorizedScopes"]; truthy(raw) {
		list, ok := raw.([]any)
		if !ok {
			return authFail("ext.authorizedScopes must be an array")
		}
		authorized, ok := scopeList(list)
		if !ok {
			return authFail("ext.authorizedScopes must be an array of valid scopes")
		}
		have := e.Expand(withAnonymous(c.scopes))
		if !AllOfScopes(authorized...).SatisfiedBy(have) {
			return authFail("Supplied credentials do not satisfy authorizedScopes; credentials have scopes:\n\n```\n" +
				strings.Join(have, "\n") + "\n```\n\nauthorizedScopes are:\n\n```\n" +
				strings.Join(authorized, "\n") + "\n```")
		}
		c.scopes = authorized
	}
	return nil
}

// applyCertificate validates a temporary-credentials certificate against
// the issuing client (whose expanded scopes are in c.scopes) and, if
// valid, switches c to the derived key, the certificate's scopes and the
// earlier expiry.
func (c *loadedCredentials) applyCertificate(name, issuing string, raw any, now time.Time) error {
	var cert map[string]any
	switch v := raw.(type) {
	case map[string]any:
		cert = v
	case []any:
		// A JSON array is an object in JavaScript, just one without the
		// fields checked next.
		cert = map[string]any{}
	default:
		return authFail("ext.certificate must be a JSON object")
	}
	if v, ok := number(cert["version"]); !ok || v != 1 {
		return authFail("ext.certificate.version must be 1")
	}
	seed, ok := cert["seed"].(string)
	if !ok {
		return authFail("ext.certificate.seed must be a string")
	}
	if utf16Len(seed) != 44 {
		return authFail("ext.certificate.seed must be 44 characters")
	}
	start, ok := number(cert["start"])
	if !ok {
		return authFail("ext.certificate.start must be a number")
	}
	expiry, ok := number(cert["expiry"])
	if !ok {
		return authFail("ext.certificate.expiry must be a number")
	}
	list, ok := cert["scopes"].([]any)
	if !ok {
		return authFail("ext.certificate.scopes must be an array")
	}
	scopes, ok := scopeList(list)
	if !ok {
		return authFail("ext.certificate.scopes must be an array of valid scopes")
	}
	if err := checkCertificateTimes(start, expiry, now); err != nil {
		return err
	}
	if expiry-start > float64(MaxTemporaryCredentialsSpan.Milliseconds()) {
		return authFail("ext.certificate cannot last longer than 31 days!")
	}
	if issuing != name {
		createScope := "auth:create-client:" + name
		if !SetSatisfies(c.scopes, createScope) {
			return authFail("ext.certificate issuer `" + issuing + "` doesn't have `" + createScope + "` for supplied clientId.")
		}
	} else if _, has := cert["clientId"]; has {
		return authFail("ext.certificate.clientId must only be used with ext.certificate.issuer")
	}
	if !AllOfScopes(scopes...).SatisfiedBy(c.scopes) {
		return authFail("ext.certificate issuer `" + issuing + "` doesn't satisfy all certificate scopes " +
			strings.Join(scopes, ", ") + ".  The temporary credentials were not generated correctly.")
	}

	// An issuer that is truthy was checked to be a string above.
	issuer, _ := cert["issuer"].(string)
	sigName := ""
	if issuer != "" {
		sigName = name
	}
	text := SignatureString(sigName, issuer, seed, jsvalue.NumberString(start), jsvalue.NumberString(expiry), scopes)
	valid := signatureMatches(cert["signature"], CertificateSignature(c.key, text))
	if !valid && len(scopes) == 0 {
		// The JS client signs empty scope lists with a trailing newline
		// after "scopes:"; Taskcluster rejects those, hopper accepts both.
		valid = signatureMatches(cert["signature"], CertificateSignature(c.key, text+"\n"))
	}
	if !valid {
		if issuer != "" {
			return authFail("ext.certificate.signature is not valid, or wrong clientId provided")
		}
		return authFail("ext.certificate.signature is not valid")
	}

	c.key = DeriveAccessToken(c.key, seed)
	if certExpires := jsDate(expiry); certExpires.Before(c.expires) {
		c.expires = certExpires
	}
	c.scopes = scopes
	c.cert, c.certStart, c.certExpiry = true, start, expiry
	return nil
}

// checkCertificateTimes checks a certificate's start and expiry
// (milliseconds since the epoch) against now, with certificateSkew of
// tolerance either way.
func checkCertificateTimes(start, expiry float64, now time.Time) error {
	nowMs := float64(now.UnixMilli())
	skew := float64(certificateSkew.Milliseconds())
	if start > nowMs+skew {
		return authFail("ext.certificate.start > now")
	}
	if expiry < nowMs-skew {
		return authFail("ext.certificate.expiry < now")
	}
	return nil
}

func signatureMatches(sent any, want string) bool {
	s, ok := sent.(string)
	return ok && subtle.ConstantTimeCompare([]byte(s), []byte(want)) == 1
}

// truthy is JavaScript truthiness of a decoded JSON value.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, _ := number(v)
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

// number returns a decoded JSON number as JavaScript sees it (overflowing
// literals become ±Infinity).
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// scopeList converts a decoded JSON array to scopes if every member is a
// valid scope string.
func scopeList(list []any) ([]string, bool) {
	out := make([]string, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok || !ValidScope(s) {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// utf16Len is the JavaScript length of s.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// jsDate converts milliseconds since the epoch to a time, clamping values
// outside what time.Time can represent.
func jsDate(ms float64) time.Time {
	const limit = 8.64e15 // JavaScript's Date range
	switch {
	case math.IsNaN(ms) || ms > limit:
		ms = limit
	case ms < -limit:
		ms = -limit
	}
	return time.UnixMilli(int64(ms))
}

// nodeBase64Decode decodes base64 the way Node's Buffer.from(s, "base64")
// does: both alphabets accepted, other characters skipped, decoding stops
// at the first "=", and a dangling final character is dropped.
func nodeBase64Decode(s string) []byte {
	out := make([]byte, 0, len(s)*3/4)
	var acc uint32
	bits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c >= 'A' && c <= 'Z':
			v = c - 'A'
		case c >= 'a' && c <= 'z':
			v = c - 'a' + 26
		case c >= '0' && c <= '9':
			v = c - '0' + 52
		case c == '+' || c == '-':
			v = 62
		case c == '/' || c == '_':
			v = 63
		case c == '=':
			return out
		default:
			if c >= utf8.RuneSelf {
				// Skip the whole multi-byte character.
				_, size := utf8.DecodeRuneInString(s[i:])
				i += size - 1
			}
			continue
		}
		acc = acc<<6 | uint32(v)
		bits += 6
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	return out
}
