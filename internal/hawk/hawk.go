// Package hawk implements the subset of the Hawk HTTP authentication scheme
// (hawk 9.x, SHA-256 only) that Taskcluster clients and services use: request
// headers, bewits (signed GET URLs) and payload hashes, on both the signing
// (client) and the verifying (server) side.
//
// The server side reproduces the failure messages Taskcluster reports (for
// example "Unauthorized: Bad mac"), because users and tests grep for them.
// It knows nothing about clients, certificates or scopes: the caller looks up
// the key for the Hawk id and decides what the ext attribute means (see
// package auth).
package hawk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Limits and tolerances shared by the client and the server side.
const (
	// MaxMatchLength bounds the length of an Authorization header and of a
	// bewit request-target; Hawk refuses longer inputs to avoid pathological
	// regular-expression work, and Taskcluster inherits the limit.
	MaxMatchLength = 4096

	// TimestampSkew is the clock skew Taskcluster allows between a request's
	// ts attribute and the server clock, in either direction (Hawk's own
	// default is one minute; Taskcluster raises it to fifteen).
	TimestampSkew = 900 * time.Second
)

// Kinds of normalized strings; each is MACed with a different first line so
// that a MAC of one kind can never be replayed as another.
const (
	KindHeader = "header"
	KindBewit  = "bewit"
)

// Credentials identify a Hawk signer.
type Credentials struct{ ID, Key string }

// Artifacts are the values covered by a Hawk MAC.
type Artifacts struct {
	// Method is the HTTP method; it is uppercased when normalized.
	Method string
	// Resource is the raw request-target: the still-percent-encoded path
	// plus "?" and the raw query if any.
	Resource string
	// Host is the host name; it is lowercased when normalized.
	Host string
	// Port is the TCP port the client addressed.
	Port int
	// TS is the timestamp attribute exactly as sent (for bewits, the expiry).
	TS string
	// Nonce is the nonce attribute (empty for bewits).
	Nonce string
	// Hash is the payload hash attribute, empty when not sent.
	Hash string
	// Ext is the ext attribute, empty when not sent.
	Ext string
	// App and Dlg are Oz attributes; Taskcluster never uses them but they are
	// covered by the MAC when present.
	App, Dlg string
}

// NormalizedString returns the string Hawk MACs for artifacts of the given
// kind (KindHeader or KindBewit).
func NormalizedString(kind string, a Artifacts) string {
	var b strings.Builder
	b.Grow(64 + len(a.Resource) + len(a.Host) + len(a.Hash) + len(a.Ext))
	b.WriteString("hawk.1.")
	b.WriteString(kind)
	b.WriteByte('\n')
	b.WriteString(a.TS)
	b.WriteByte('\n')
	b.WriteString(a.Nonce)
	b.WriteByte('\n')
	b.WriteString(strings.ToUpper(a.Method))
	b.WriteByte('\n')
	b.WriteString(resourcePath(a.Resource))
	b.WriteByte('\n')
	b.WriteString(strings.ToLower(a.Host))
	b.WriteByte('\n')
	b.WriteString(strconv.Itoa(a.Port))
	b.WriteByte('\n')
	b.WriteString(a.Hash)
	b.WriteByte('\n')
	writeEscapedExt(&b, a.Ext)
	b.WriteByte('\n')
	if a.App != "" {
		b.WriteString(a.App)
		b.WriteByte('\n')
		b.WriteString(a.Dlg)
		b.WriteByte('\n')
	}
	return b.String()
}

// writeEscapedExt writes ext with backslashes and newlines escaped: ext is
// free text in Hawk, so its line structure is protected by escaping.
// Taskcluster's base64 ext never needs it, so that case costs two fast
// scans and no allocation.
func writeEscapedExt(b *strings.Builder, ext string) {
	if strings.IndexByte(ext, '\\') < 0 && strings.IndexByte(ext, '\n') < 0 {
		b.WriteString(ext)
		return
	}
	for i := 0; i < len(ext); i++ {
		switch c := ext[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
}

// resourcePath reduces an absolute-form request-target
// ("http://host/path?q") to its path and query, as Hawk does; origin-form
// targets are returned unchanged.
func resourcePath(resource string) string {
	if resource == "" || resource[0] == '/' {
		return resource
	}
	u, err := url.Parse(resource)
	if err != nil {
		return resource
	}
	return u.RequestURI()
}

// MAC returns the standard-base64 HMAC-SHA256, keyed with key, of the
// normalized string of artifacts of the given kind.
func MAC(key, kind string, a Artifacts) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(NormalizedString(kind, a)))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// PayloadHash returns the Hawk payload hash of body sent with contentType.
// Only the media type matters: parameters after ";" are dropped and the
// rest is trimmed and lowercased, as Hawk does on both sides.
func PayloadHash(contentType string, body []byte) string {
	h := sha256.New()
	h.Write([]byte("hawk.1.payload\n"))
	h.Write([]byte(normalizeContentType(contentType)))
	h.Write([]byte("\n"))
	h.Write(body)
	h.Write([]byte("\n"))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func normalizeContentType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// Error is an authentication failure. Its message is the text Taskcluster
// reports for the same failure (first line of the 401 error message).
type Error struct {
	// Message is the Taskcluster-compatible failure text.
	Message string
}

// Error returns the Taskcluster-compatible failure text.
func (e *Error) Error() string { return e.Message }

func fail(msg string) error { return &Error{Message: msg} }

// Failure messages produced by this package. They are Hawk's Boom errors as
// Taskcluster renders them ("<HTTP reason>: <message>").
const (
	MsgUnauthorized          = "Unauthorized: Unauthorized"
	MsgHeaderTooLong         = "Bad Request: Header length too long"
	MsgInvalidHeaderSyntax   = "Bad Request: Invalid header syntax"
	MsgBadHeaderFormat       = "Bad Request: Bad header format"
	MsgMissingAttributes     = "Bad Request: Missing attributes"
	MsgBadMAC                = "Unauthorized: Bad mac"
	MsgStaleTimestamp        = "Unauthorized: Stale timestamp"
	MsgResourceTooLong       = "Bad Request: Resource path exceeds max length"
	MsgEmptyBewit            = "Unauthorized: Empty bewit"
	MsgInvalidMethod         = "Unauthorized: Invalid method"
	MsgInvalidBewitEncoding  = "Bad Request: Invalid bewit encoding"
	MsgInvalidBewitStructure = "Bad Request: Invalid bewit structure"
	MsgMissingBewitAttrs     = "Bad Request: Missing bewit attributes"
	MsgAccessExpired         = "Unauthorized: Access expired"
	MsgInvalidHost           = "Bad Request: Invalid Host header"
	// MsgInvalidPayloadHashPrefix starts the message of a payload hash
	// mismatch; the sent and computed hashes follow.
	MsgInvalidPayloadHashPrefix = "Invalid payload hash: "
)
