package hawk

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// RequestHeader returns the Authorization header value ("Hawk id=..., ts=...,
// nonce=..., [hash=...,] [ext=...,] mac=...") for a request; hash and ext may
// be empty (then omitted). The MAC covers the request-target of rawURL as Go's
// HTTP client sends it (escaped path plus raw query), its host name and its
// port (explicit, else 80 for http and 443 otherwise), so rawURL should be the
// exact URL the request is sent to.
func RequestHeader(c Credentials, method, rawURL string, ts time.Time, nonce, hash, ext string) (string, error) {
	if c.ID == "" || c.Key == "" {
		return "", errors.New("hawk: credentials need both an id and a key")
	}
	if method == "" {
		return "", errors.New("hawk: empty method")
	}
	if nonce == "" {
		nonce = NewNonce()
	}
	for _, attr := range []struct{ name, value string }{
		{"id", c.ID}, {"nonce", nonce}, {"hash", hash}, {"ext", ext},
	} {
		// The server refuses values outside this set, so signing them would
		// only produce a header that can never verify.
		if attr.value != "" && !validAttributeValue(attr.value) {
			return "", fmt.Errorf("hawk: attribute %s has characters a server rejects", attr.name)
		}
	}
	target, err := parseTarget(rawURL)
	if err != nil {
		return "", err
	}
	a := Artifacts{
		Method:   method,
		Resource: target.resource,
		Host:     target.host,
		Port:     target.port,
		TS:       strconv.FormatInt(ts.Unix(), 10),
		Nonce:    nonce,
		Hash:     hash,
		Ext:      ext,
	}
	mac := MAC(c.Key, KindHeader, a)
	var b strings.Builder
	b.WriteString(`Hawk id="`)
	b.WriteString(c.ID)
	b.WriteString(`", ts="`)
	b.WriteString(a.TS)
	b.WriteString(`", nonce="`)
	b.WriteString(nonce)
	if hash != "" {
		b.WriteString(`", hash="`)
		b.WriteString(hash)
	}
	if ext != "" {
		b.WriteString(`", ext="`)
		b.WriteString(ext)
	}
	b.WriteString(`", mac="`)
	b.WriteString(mac)
	b.WriteString(`"`)
	return b.String(), nil
}

// NewNonce returns a fresh random 6-character nonce.
func NewNonce() string {
	var buf [6]byte
	// crypto/rand.Read never fails on supported platforms (it panics
	// internally if the kernel source is broken), so the error is moot.
	_, _ = rand.Read(buf[:])
	return base64.RawURLEncoding.EncodeToString(buf[:])[:6]
}

// SignURL returns rawURL with a "bewit" query parameter appended that is
// valid until exp (Taskcluster buildSignedUrl semantics): the bewit is the
// last query parameter, joined with "&" when the URL already has a query.
// ext is the base64 JSON ext of the signer (certificate and/or
// authorizedScopes), or empty.
func SignURL(c Credentials, rawURL string, exp time.Time, ext string) (string, error) {
	bewit, err := BewitFor(c, rawURL, exp, ext)
	if err != nil {
		return "", err
	}
	base, fragment, hasFragment := strings.Cut(rawURL, "#")
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	out := base + sep + "bewit=" + bewit
	if hasFragment {
		out += "#" + fragment
	}
	return out, nil
}

// BewitFor returns the bewit value (base64url without padding of
// "id\exp\mac\ext") authorizing GET requests to rawURL until exp.
func BewitFor(c Credentials, rawURL string, exp time.Time, ext string) (string, error) {
	if c.ID == "" || c.Key == "" {
		return "", errors.New("hawk: credentials need both an id and a key")
	}
	if strings.Contains(c.ID, `\`) || strings.Contains(ext, `\`) {
		return "", errors.New(`hawk: bewit id and ext may not contain "\"`)
	}
	target, err := parseTarget(rawURL)
	if err != nil {
		return "", err
	}
	expStr := strconv.FormatInt(exp.Unix(), 10)
	mac := MAC(c.Key, KindBewit, Artifacts{
		Method:   "GET",
		Resource: target.resource,
		Host:     target.host,
		Port:     target.port,
		TS:       expStr,
		Ext:      ext,
	})
	return base64.RawURLEncoding.EncodeToString([]byte(c.ID + `\` + expStr + `\` + mac + `\` + ext)), nil
}

type target struct {
	resource string
	host     string
	port     int
}

func parseTarget(rawURL string) (target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return target{}, fmt.Errorf("hawk: parsing URL: %w", err)
	}
	if u.Host == "" {
		return target{}, fmt.Errorf("hawk: URL %q has no host", rawURL)
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		port, err = strconv.Atoi(p)
		if err != nil {
			return target{}, fmt.Errorf("hawk: URL port %q: %w", p, err)
		}
	}
	// RequestURI is exactly the request-target net/http writes on the wire,
	// so the MAC covers what the server will see.
	return target{resource: u.RequestURI(), host: strings.ToLower(u.Hostname()), port: port}, nil
}

// validAttributeValue reports whether s consists only of the characters
// Hawk allows inside a quoted header attribute value.
func validAttributeValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !attributeChar(s[i]) {
			return false
		}
	}
	return true
}

// attributeChar reports whether c may appear in a header attribute value:
// Hawk lists letters, digits and " _!#$%&'()*+,-./:;<=>?@[]^`{|}~", which
// is every printable ASCII character except the quote and the backslash.
func attributeChar(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'
}
