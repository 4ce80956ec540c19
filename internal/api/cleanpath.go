package api

import (
	"net/http"
	"path"
	"strings"
)

// Go's ServeMux answers a request whose path is not in canonical form
// ("a//b", "a/./b", "a/../b") with a redirect to the cleaned path. For an
// artifact (or any name that is the tail of a route, "{name...}") that is
// wrong twice over: the name is no longer the one asked for, and a Hawk
// signature made for the original path fails on the redirected request
// ("Bad mac"). Taskcluster takes the tail verbatim, however many slashes or
// dots it holds, so hopper does the same: before routing, the tail of such
// a path is re-escaped ("/" as "%2F"), which the mux matches without
// cleaning; the raw request URI, which Hawk signs, is left untouched.
// Other non-canonical API paths get the plain 404 (Taskcluster's router
// has no route for them either) rather than a redirect.

// tailRoute is the fixed part of a route ending in a "{name...}" wildcard.
type tailRoute struct {
	// segments before the tail; "" stands for a single-segment wildcard.
	segments []string
}

func newTailRoute(pattern string) (tailRoute, bool) {
	if !strings.HasSuffix(pattern, "...}") {
		return tailRoute{}, false
	}
	parts := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	parts = parts[:len(parts)-1]
	segs := make([]string, len(parts))
	for i, p := range parts {
		if !strings.HasPrefix(p, "{") {
			segs[i] = p
		}
	}
	return tailRoute{segments: segs}, true
}

// escapeTail returns the escaped path with the tail's slashes escaped, if
// the path's leading segments match the route.
func (tr tailRoute) escapeTail(escaped string) (string, bool) {
	parts := strings.SplitN(strings.TrimPrefix(escaped, "/"), "/", len(tr.segments)+1)
	if len(parts) != len(tr.segments)+1 || parts[len(tr.segments)] == "" {
		return "", false
	}
	for i, want := range tr.segments {
		got := parts[i]
		if want == "" {
			if got == "" || got == "." || got == ".." {
				return "", false
			}
		} else if got != want {
			return "", false
		}
	}
	tail := strings.ReplaceAll(parts[len(tr.segments)], "/", "%2F")
	return "/" + strings.Join(parts[:len(tr.segments)], "/") + "/" + tail, true
}

// canonicalPath is the path ServeMux would redirect to: cleaned, keeping a
// trailing slash.
func canonicalPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// routeVerbatim serves non-canonical API paths as described above and
// passes everything else to the mux.
func (s *Server) routeVerbatim(w http.ResponseWriter, r *http.Request) {
	escaped := r.URL.EscapedPath()
	if !strings.HasPrefix(escaped, "/api/") || canonicalPath(escaped) == escaped {
		s.mux.ServeHTTP(w, r)
		return
	}
	for _, tr := range s.tails {
		if raw, ok := tr.escapeTail(escaped); ok {
			r2 := r.WithContext(r.Context())
			u := *r.URL
			u.RawPath = raw
			r2.URL = &u
			s.mux.ServeHTTP(w, r2)
			return
		}
	}
	WriteJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
}
