package hawk

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// HostPort returns the host name and port that the client of r addressed,
// which a Hawk MAC covers. As in Taskcluster: the host name comes from the
// Host header (X-Forwarded-Host is ignored) and is lowercased; the port is
// the Host header's port, else 443 for TLS connections and 80 otherwise;
// then X-Forwarded-Port (its first value, if it starts with an integer)
// overrides it, or failing that "X-Forwarded-Proto: https" forces 443.
// These overrides are what let clients behind a TLS-terminating proxy
// verify. A missing or malformed Host header fails with MsgInvalidHost.
//
// IPv6 literals are returned without brackets, because that is the host
// name clients sign (Go's URL.Hostname and Node's legacy url.parse).
func HostPort(r *http.Request) (string, int, error) {
	host, port, ok := splitHostHeader(r.Host)
	if !ok {
		return "", 0, fail(MsgInvalidHost)
	}
	if port == 0 {
		port = 80
		if r.TLS != nil {
			port = 443
		}
	}
	if fwd := r.Header.Values("X-Forwarded-Port"); len(fwd) > 0 {
		if p := jsvalue.ParseInt(fwd[0]); p > 0 && p <= 65535 {
			port = int(p)
		}
	} else if proto := r.Header.Values("X-Forwarded-Proto"); len(proto) == 1 && proto[0] == "https" {
		port = 443
	}
	return host, port, nil
}

// splitHostHeader parses a Host header value the way a WHATWG URL parser
// reads "http://" + value, returning port 0 when the value names none (or
// names 80, the http default, which the URL parser drops).
func splitHostHeader(h string) (string, int, bool) {
	if h == "" || len(h) > MaxMatchLength || strings.Contains(h, "/") {
		return "", 0, false
	}
	var name, portStr string
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", 0, false
		}
		name, portStr = h[1:end], h[end+1:]
		if name == "" {
			return "", 0, false
		}
		if portStr != "" {
			if portStr[0] != ':' {
				return "", 0, false
			}
			portStr = portStr[1:]
		}
	} else {
		var hasPort bool
		name, portStr, hasPort = strings.Cut(h, ":")
		if hasPort && strings.Contains(portStr, ":") {
			return "", 0, false
		}
		if name == "" || strings.ContainsAny(name, " #%<>?@[\\]^|\t\r\n") {
			return "", 0, false
		}
	}
	port := 0
	if portStr != "" {
		p, err := strconv.Atoi(portStr)
		if err != nil || p < 0 || p > 65535 || strings.TrimLeft(portStr, "0123456789") != "" {
			return "", 0, false
		}
		if p != 80 {
			port = p
		}
	}
	return strings.ToLower(name), port, true
}
