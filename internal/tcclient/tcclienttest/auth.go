package tcclienttest

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/hawk"
)

// ---------------------------------------------------------------------------
// HTTP plumbing

type apiError struct {
	status int
	code   string
	msg    string
}

func fail(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

type caller struct {
	clientID string
	scopes   []string // effective scopes; nil for anonymous
}

func (c *caller) satisfies(required string) bool {
	for _, have := range c.scopes {
		if have == required || strings.HasSuffix(have, "*") && strings.HasPrefix(required, strings.TrimSuffix(have, "*")) {
			return true
		}
	}
	return false
}

// authenticate verifies the Hawk header (if any) and computes the caller's
// effective scopes.
func (s *Server) authenticate(r *http.Request, rec *Request) (*caller, *apiError) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return &caller{}, nil
	}
	attrs, err := parseHawk(h)
	if err != nil {
		return nil, fail(401, "AuthenticationFailed", "%v", err)
	}
	id := attrs["id"]
	rec.ClientID = id
	s.mu.Lock()
	cl, ok := s.clients[id]
	s.mu.Unlock()
	if !ok {
		return nil, fail(401, "AuthenticationFailed", "unknown client %q", id)
	}
	if !cl.expires.IsZero() && time.Now().After(cl.expires) {
		return nil, fail(401, "AuthenticationFailed", "credentials of %q expired", id)
	}
	ts, err := strconv.ParseInt(attrs["ts"], 10, 64)
	if err != nil {
		return nil, fail(401, "AuthenticationFailed", "bad ts")
	}
	rawURL := "http://" + r.Host + r.URL.RequestURI()
	want, err := hawk.RequestHeader(hawk.Credentials{ID: id, Key: cl.token}, r.Method, rawURL,
		time.Unix(ts, 0), attrs["nonce"], attrs["hash"], attrs["ext"])
	if err != nil {
		return nil, fail(401, "AuthenticationFailed", "recomputing mac: %v", err)
	}
	wantAttrs, _ := parseHawk(want)
	if subtle.ConstantTimeCompare([]byte(wantAttrs["mac"]), []byte(attrs["mac"])) != 1 {
		return nil, fail(401, "AuthenticationFailed", "bad mac")
	}
	scopes := cl.scopes
	if ext := attrs["ext"]; ext != "" {
		raw, err := base64.StdEncoding.DecodeString(ext)
		if err != nil {
			return nil, fail(401, "AuthenticationFailed", "ext is not base64: %v", err)
		}
		var parsed struct {
			Certificate      json.RawMessage `json:"certificate"`
			AuthorizedScopes *[]string       `json:"authorizedScopes"`
		}
		if err := json.Unmarshal(raw, &parsed); err != nil {
			return nil, fail(401, "AuthenticationFailed", "ext is not JSON: %v", err)
		}
		rec.HasCertificate = len(parsed.Certificate) > 0
		if parsed.AuthorizedScopes != nil {
			rec.AuthorizedScopes = *parsed.AuthorizedScopes
			// Restrict to scopes both held and authorized: a held scope
			// satisfies an authorized one, which is then kept.
			held := &caller{scopes: cl.scopes}
			var eff []string
			for _, a := range *parsed.AuthorizedScopes {
				if held.satisfies(a) {
					eff = append(eff, a)
				}
			}
			scopes = eff
		}
	}
	return &caller{clientID: id, scopes: scopes}, nil
}

func parseHawk(h string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(h, "Hawk ")
	if !ok {
		return nil, fmt.Errorf("not a Hawk header")
	}
	out := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		key, after, ok := strings.Cut(rest, `="`)
		if !ok {
			return nil, fmt.Errorf("malformed Hawk header")
		}
		val, after2, ok := strings.Cut(after, `"`)
		if !ok {
			return nil, fmt.Errorf("malformed Hawk header")
		}
		out[strings.TrimSpace(key)] = val
		rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(after2), ","))
	}
	return out, nil
}

func requireScope(c *caller, scope string) *apiError {
	if c.satisfies(scope) {
		return nil
	}
	return fail(403, "InsufficientScopes", "client %q lacks scope %s", c.clientID, scope)
}

func randomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
