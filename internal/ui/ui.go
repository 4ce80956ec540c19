// Package ui serves hopper's web console: a single page (TypeScript and
// Preact, source in web/, bundled by esbuild into static/ and committed)
// embedded in the binary. It talks to the Taskcluster APIs of the same
// origin (anonymously, or signed with Hawk in the browser once the user
// signs in) and follows the live event stream of internal/live.
//
// static/ holds the built files: `go build` needs no Node. Rebuild them
// with `npm ci --prefix web && npm run build --prefix web` after changing
// web/src; CI checks that the committed files match the source.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the UI is mounted at; Handler expects requests under
// it (e.g. mux.Handle(ui.Prefix, ui.Handler())).
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every UI response. Scripts, styles and
// images come only from the UI itself, so injected markup could not run
// code even if escaping failed somewhere. connect-src is wider than
// 'self' because task logs are read from where the queue's redirects
// point: the blob store (possibly another host, e.g. S3) and the worker's
// live-log server; it also names ws: and wss:, the task page's shell
// (browsers differ on whether 'self' covers WebSockets). Styles may also
// be inline: the terminal (xterm.js) writes <style> elements for its cell
// metrics and colours; scripts stay the UI's own.
const ContentSecurityPolicy = "default-src 'self'; connect-src 'self' http: https: ws: wss:; img-src 'self' data:; " +
	"style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed static
var static embed.FS

// Handler serves the embedded UI files under Prefix: Prefix itself is the
// page (index.html), other paths name files of static/. Only GET and HEAD
// are allowed. Responses carry the CSP above, an ETag (the content hash)
// and must be revalidated, so a new hopper binary never runs a stale page.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// The embed directive guarantees static/ exists; failing here
		// would be a build mistake, not a runtime condition.
		panic("ui: embedded static directory missing: " + err.Error())
	}
	files := map[string]file{}
	walkErr := fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[p] = file{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: contentType(p)}
		return nil
	})
	if walkErr != nil {
		panic("ui: reading embedded files: " + walkErr.Error())
	}
	return &handler{files: files}
}

// file is one embedded asset, read once at start.
type file struct {
	body        []byte
	etag        string
	contentType string
}

type handler struct {
	files map[string]file
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	// An exact lookup: "..", "//" or "static/…" name no file.
	f, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	// ServeContent answers If-None-Match from the ETag, Range, and HEAD.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}

// contentType is fixed per extension rather than read from the system's
// MIME tables, which differ between machines (and a wrong type for a
// script is fatal under nosniff).
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".json":
		return "application/json"
	}
	return "application/octet-stream"
}

// CLISigninPath is the page `taskcluster signin` opens in a browser,
// <rootUrl>/auth/clients/create?scope=…&name=…&expires=…&callback_url=…
// (where Taskcluster's own console answers).
const CLISigninPath = "/auth/clients/create"

// CLISignin sends the browser from CLISigninPath to the console's page of
// the same name, with the command's query: the console creates the client
// and hands its credentials to the command's callback.
func CLISignin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		target := Prefix + "#" + CLISigninPath
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, target, http.StatusFound)
	})
}
