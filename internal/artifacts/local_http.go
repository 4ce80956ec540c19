package artifacts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Signed URL layout:
//
//	<BaseURL><MountPath><base64url(key)>/<display name>?expires=<unix>&signature=<base64url(mac)>[&contentType=<ct>]
//
// The key travels base64url-encoded so that no artifact name ("..", "%2e",
// "a//b") can be reinterpreted by path cleaning in ServeMux, proxies or
// clients. The display name is the sanitised last segment of the artifact
// name, only there so that browsers and `curl -O` pick a sensible file name;
// it is not signed and is ignored by the handler.
const (
	queryExpires     = "expires"
	querySignature   = "signature"
	queryContentType = "contentType"

	opPut = "PUT"
	opGet = "GET"

	// macDomain separates these MACs from any other use of the same key.
	macDomain = "hopper-blob-url-v1"
)

// sign computes the URL MAC over the operation, key, expiry and (for PUT)
// content type. Fields are length-prefixed so no two distinct tuples share
// an encoding.
func (l *Local) sign(op, key, contentType string, expires int64) []byte {
	m := hmac.New(sha256.New, l.key)
	for _, field := range []string{macDomain, op, key, strconv.FormatInt(expires, 10), contentType} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		m.Write(n[:])
		m.Write([]byte(field))
	}
	return m.Sum(nil)
}

func (l *Local) signedURL(op, key, contentType string, expires int64) string {
	q := url.Values{}
	q.Set(queryExpires, strconv.FormatInt(expires, 10))
	q.Set(querySignature, base64.RawURLEncoding.EncodeToString(l.sign(op, key, contentType, expires)))
	if op == opPut {
		q.Set(queryContentType, contentType)
	}
	return l.baseURL + l.mount + base64.RawURLEncoding.EncodeToString([]byte(key)) + "/" + displayName(key) + "?" + q.Encode()
}

// displayName reduces the last segment of key to characters that survive
// any URL handling unchanged.
func displayName(key string) string {
	name := key[strings.LastIndexByte(key, '/')+1:]
	if len(name) > 100 {
		name = name[len(name)-100:]
	}
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	name = string(b)
	if strings.Trim(name, ".") == "" {
		return "blob"
	}
	return name
}

// ServeHTTP serves uploads (PUT) and downloads (GET, HEAD) through signed
// URLs, plus CORS preflights (OPTIONS). No Taskcluster credentials are
// involved: the signature is the credential.
func (l *Local) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPut, http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		l.preflight(w)
		return
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("method %s is not supported on blob URLs", r.Method))
		return
	}
	key, ok := l.keyFromPath(r.URL.EscapedPath())
	if !ok {
		writeError(w, http.StatusNotFound, "ResourceNotFound", "not a blob URL")
		return
	}
	q := r.URL.Query()
	op := opGet
	if r.Method == http.MethodPut {
		op = opPut
	}
	signedCT := q.Get(queryContentType)
	if status, code, msg := l.verify(op, key, signedCT, q); status != 0 {
		writeError(w, status, code, msg)
		return
	}
	if op == opPut {
		l.serveUpload(w, r, key, signedCT)
		return
	}
	l.serveDownload(w, r, key)
}

// keyFromPath extracts the key from "<mount><base64 key>/<display name>".
// The mount prefix is optional so that the handler also works behind
// http.StripPrefix.
func (l *Local) keyFromPath(p string) (string, bool) {
	p = strings.TrimPrefix(p, l.mount)
	p = strings.TrimPrefix(p, "/")
	encoded, _, ok := strings.Cut(p, "/")
	if !ok || encoded == "" {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil || validateKey(string(raw)) != nil {
		return "", false
	}
	return string(raw), true
}

// verify checks the signature before the expiry, so that an attacker learns
// nothing about a URL he cannot sign. It returns status 0 when the URL is
// valid.
func (l *Local) verify(op, key, contentType string, q url.Values) (int, string, string) {
	expires, err := strconv.ParseInt(q.Get(queryExpires), 10, 64)
	if err != nil {
		return http.StatusForbidden, "SignatureInvalid", "blob URL has no valid expiry"
	}
	got, err := base64.RawURLEncoding.DecodeString(q.Get(querySignature))
	if err != nil || len(got) != sha256.Size {
		return http.StatusForbidden, "SignatureInvalid", "blob URL has no valid signature"
	}
	if !hmac.Equal(got, l.sign(op, key, contentType, expires)) {
		return http.StatusForbidden, "SignatureInvalid", fmt.Sprintf("blob URL signature does not match (it may not be a %s URL)", op)
	}
	if l.now().After(time.Unix(expires, 0)) {
		return http.StatusForbidden, "UrlExpired", fmt.Sprintf("blob URL expired at %s", time.Unix(expires, 0).UTC().Format(time.RFC3339))
	}
	return 0, "", ""
}

func (l *Local) serveUpload(w http.ResponseWriter, r *http.Request, key, signedCT string) {
	if ct := r.Header.Get("Content-Type"); ct != signedCT {
		writeError(w, http.StatusBadRequest, "InputError",
			fmt.Sprintf("Content-Type %q does not match the artifact's content type %q", ct, signedCT))
		return
	}
	// Go sets ContentLength to 0 for a request with neither Content-Length
	// nor chunked encoding, so the header itself is checked too.
	size := r.ContentLength
	if size < 0 || (len(r.Header.Values("Content-Length")) == 0 && r.ProtoMajor < 2) {
		if !strings.HasPrefix(key, ObjectKeyPrefix) || size >= 0 {
			writeError(w, http.StatusLengthRequired, "LengthRequired", "uploads must carry a Content-Length header")
			return
		}
		// Objects may arrive chunked: Taskcluster's Go client (and so
		// generic-worker) streams a file without declaring its length.
		size = unknownSize
	}
	if l.maxSize > 0 && r.ContentLength > l.maxSize {
		writeError(w, http.StatusRequestEntityTooLarge, "PayloadTooLarge",
			fmt.Sprintf("upload of %d bytes exceeds the limit of %d bytes", r.ContentLength, l.maxSize))
		return
	}
	m, err := l.store(r.Context(), key, signedCT, r.Header.Get("Content-Encoding"), size, r.Body)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "PayloadTooLarge", fmt.Sprintf("upload exceeds the limit of %d bytes", l.maxSize))
			return
		}
		if errors.Is(err, errShortBody) || errors.Is(err, io.ErrUnexpectedEOF) {
			writeError(w, http.StatusBadRequest, "InputError", "request body is shorter than its Content-Length")
			return
		}
		if r.Context().Err() != nil {
			// The uploader went away; nobody is listening for a reply.
			return
		}
		l.log.Error("storing uploaded blob", "key", key, "error", err)
		writeError(w, http.StatusInternalServerError, "InternalServerError", "storing the upload failed")
		return
	}
	w.Header().Set("ETag", `"`+m.SHA256+`"`)
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

func (l *Local) serveDownload(w http.ResponseWriter, r *http.Request, key string) {
	f, m, err := l.open(key)
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "ResourceNotFound", "no blob is stored at this URL")
		return
	}
	if err != nil {
		l.log.Error("opening blob", "key", key, "error", err)
		writeError(w, http.StatusInternalServerError, "InternalServerError", "reading the blob failed")
		return
	}
	defer f.Close()

	h := w.Header()
	ct := m.ContentType
	if ct == "" {
		ct = "application/octet-stream" // never sniff: the uploader decides
	}
	h.Set("Content-Type", ct)
	if m.ContentEncoding != "" {
		h.Set("Content-Encoding", m.ContentEncoding)
	}
	if m.SHA256 != "" {
		h.Set("ETag", `"`+m.SHA256+`"`)
	}
	// Blobs are served from hopper's own origin. Artifacts are arbitrary
	// uploads (HTML reports included), so they run sandboxed in an opaque
	// origin and are never content-sniffed: they cannot act as the API's
	// origin. CORS is open because the URL itself is the credential and the
	// Taskcluster UI fetches logs cross-origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox allow-scripts allow-popups allow-forms allow-downloads")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", "Content-Encoding, Content-Length, ETag")
	// ServeContent streams the file and adds Content-Length, Range and
	// conditional-request handling, and answers HEAD without a body.
	if m.ContentEncoding != "" {
		// ServeContent leaves out Content-Length when Content-Encoding is
		// set (in case a middleware compresses); uploaders' encodings are
		// final here and downloaders expect the length, as from S3.
		w = &encodedLengthWriter{ResponseWriter: w, size: m.Size}
	}
	http.ServeContent(w, r, "", m.Modified, f)
}

// encodedLengthWriter adds the Content-Length that ServeContent omits for
// content-encoded bodies, deriving it from the Content-Range of partial
// answers. It forwards ReadFrom so that the file is still sent with
// sendfile.
type encodedLengthWriter struct {
	http.ResponseWriter
	size        int64
	wroteHeader bool
}

func (w *encodedLengthWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		h := w.Header()
		if h.Get("Content-Length") == "" {
			switch code {
			case http.StatusOK:
				h.Set("Content-Length", strconv.FormatInt(w.size, 10))
			case http.StatusPartialContent:
				var first, last, total int64
				if _, err := fmt.Sscanf(h.Get("Content-Range"), "bytes %d-%d/%d", &first, &last, &total); err == nil && last >= first {
					h.Set("Content-Length", strconv.FormatInt(last-first+1, 10))
				}
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *encodedLengthWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *encodedLengthWriter) ReadFrom(r io.Reader) (int64, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *encodedLengthWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (l *Local) preflight(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, PUT")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Content-Encoding, Range")
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
}

// writeError answers with a small JSON body in Taskcluster's error shape.
func writeError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, message})
	h := w.Header()
	h.Del("Content-Encoding")
	h.Del("ETag")
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
