package artifacts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/stretchr/testify/require"
)

// newFakeClock is a settable clock for NowFunc, starting now.
func newFakeClock() *testclock.Clock { return testclock.New(time.Now()) }

type localBundle struct {
	local  *Local
	server *httptest.Server
	clock  *testclock.Clock
	dir    string
}

// setupLocal starts a Local backend mounted on a ServeMux the way the API
// server mounts it, behind a loopback HTTP server.
func setupLocal(t testing.TB, mutate func(*LocalOptions)) *localBundle {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	clock := newFakeClock()
	dir := t.TempDir()
	opts := LocalOptions{
		Dir:        dir,
		BaseURL:    srv.URL,
		SigningKey: bytes.Repeat([]byte("k"), MinSigningKeyLen),
		NowFunc:    clock.Now,
	}
	if mutate != nil {
		mutate(&opts)
	}
	l, err := NewLocal(opts)
	require.NoError(t, err)
	mux.Handle(l.MountPath(), l)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not the blob handler", http.StatusTeapot)
	})
	return &localBundle{local: l, server: srv, clock: clock, dir: dir}
}

func TestLocalBackend(t *testing.T) {
	t.Parallel()
	runBackendSuite(t, func(t *testing.T) harness {
		b := setupLocal(t, nil)
		return harness{
			backend:      b.local,
			shortExpiry:  func() time.Time { return b.clock.Now().Add(time.Minute) },
			expire:       func(*testing.T, string) { b.clock.Advance(time.Minute + time.Second) },
			headOnGetURL: true,
			checkRefused: requireStatus,
		}
	})
}

func TestNewLocalValidation(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte("k"), MinSigningKeyLen)
	tests := []struct {
		name    string
		opts    LocalOptions
		wantErr string
	}{
		{"no dir", LocalOptions{BaseURL: "http://h", SigningKey: key}, "no directory"},
		{"short key", LocalOptions{Dir: "d", BaseURL: "http://h", SigningKey: key[:31]}, "signing key"},
		{"relative base", LocalOptions{Dir: "d", BaseURL: "/tc", SigningKey: key}, "absolute"},
		{"ftp base", LocalOptions{Dir: "d", BaseURL: "ftp://h", SigningKey: key}, "absolute"},
		{"base with query", LocalOptions{Dir: "d", BaseURL: "http://h/?a=b", SigningKey: key}, "absolute"},
		{"mount without slash", LocalOptions{Dir: "d", BaseURL: "http://h", SigningKey: key, MountPath: "/blobs"}, "mount path"},
		{"mount root", LocalOptions{Dir: "d", BaseURL: "http://h", SigningKey: key, MountPath: "/"}, "mount path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.opts.Dir != "" {
				tt.opts.Dir = filepath.Join(t.TempDir(), tt.opts.Dir)
			}
			_, err := NewLocal(tt.opts)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestLocalURLShape(t *testing.T) {
	t.Parallel()
	l, err := NewLocal(LocalOptions{
		Dir:        t.TempDir(),
		BaseURL:    "https://tc.example.com/",
		SigningKey: bytes.Repeat([]byte("k"), MinSigningKeyLen),
		MountPath:  "/artifact-blobs/",
	})
	require.NoError(t, err)
	exp := time.Now().Add(time.Hour)
	tests := []struct {
		key         string
		wantDisplay string
	}{
		{"T/0/public/logs/live.log", "live.log"},
		{"T/0/..", "blob"},
		{"T/0/dir/", "blob"},
		{"T/0/a b%2e?.tar.gz", "a_b_2e_.tar.gz"},
		{"T/0/" + strings.Repeat("n", 300), strings.Repeat("n", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			for _, op := range []string{opGet, opPut} {
				var raw string
				if op == opGet {
					raw, err = l.GetURL(t.Context(), tt.key, exp)
				} else {
					raw, err = l.PutURL(t.Context(), tt.key, "text/plain", exp)
				}
				require.NoError(t, err)
				u, err := url.Parse(raw)
				require.NoError(t, err)
				require.Equal(t, "https", u.Scheme)
				require.Equal(t, "tc.example.com", u.Host)
				require.True(t, strings.HasPrefix(u.EscapedPath(), "/artifact-blobs/"), u.EscapedPath())
				segs := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/artifact-blobs/"), "/")
				require.Len(t, segs, 2)
				require.Regexp(t, `^[A-Za-z0-9_-]+$`, segs[0], "key segment must survive any path cleaning")
				require.Equal(t, tt.wantDisplay, segs[1])
				require.Equal(t, fmt.Sprint(exp.Unix()), u.Query().Get(queryExpires))
				if op == opPut {
					require.Equal(t, "text/plain", u.Query().Get(queryContentType))
				} else {
					require.False(t, u.Query().Has(queryContentType))
				}
				key, ok := l.keyFromPath(u.EscapedPath())
				require.True(t, ok)
				require.Equal(t, tt.key, key)
			}
		})
	}
}

// TestLocalStoreLayout checks that, whatever the artifact names, every file
// the store creates is inside its directory and named only by hashes.
func TestLocalStoreLayout(t *testing.T) {
	t.Parallel()
	b := setupLocal(t, nil)
	ctx := t.Context()
	names := []string{"../../etc/passwd", "..", "%2e%2e/%2e%2e/x", "/abs/path", "a/../../b", "..\\..\\c", "ok.txt"}
	for _, name := range names {
		key := "Task/0/" + name
		u, err := b.local.PutURL(ctx, key, "text/plain", b.clock.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, doPut(t, u, "text/plain", "", []byte(name)).status)
	}

	fileName := regexp.MustCompile(`^blobs/[0-9a-f]{2}/[0-9a-f]{64}\.(json|[0-9a-f]{16}\.data)$`)
	var files []string
	err := filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, err := filepath.Rel(b.dir, p)
		require.NoError(t, err)
		if d.IsDir() {
			require.Regexp(t, `^(\.|tmp|blobs|blobs/[0-9a-f]{2})$`, filepath.ToSlash(rel))
			return nil
		}
		require.Regexp(t, fileName, filepath.ToSlash(rel))
		files = append(files, rel)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, files, 2*len(names), "one metadata and one data file per blob, no temporary leftovers")
	for _, dir := range []string{filepath.Join(b.dir, "..", "etc"), filepath.Join(b.dir, "..", "b"), filepath.Join(b.dir, "..", "..", "b")} {
		_, err := os.Stat(dir)
		require.ErrorIs(t, err, fs.ErrNotExist, "%s must not have been created", dir)
	}
}

func TestLocalHandlerErrors(t *testing.T) {
	t.Parallel()
	b := setupLocal(t, func(o *LocalOptions) { o.MaxSize = 10 })
	ctx := t.Context()
	key := "Task/0/public/x.txt"
	putURL, err := b.local.PutURL(ctx, key, "text/plain", b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	getURL, err := b.local.GetURL(ctx, key, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	u, err := url.Parse(getURL)
	require.NoError(t, err)
	base := b.server.URL + b.local.MountPath()

	t.Run("missing blob is 404", func(t *testing.T) {
		t.Parallel()
		got := doGet(t, http.MethodGet, getURL)
		require.Equal(t, http.StatusNotFound, got.status)
		requireJSONError(t, got, "ResourceNotFound")
	})
	t.Run("tampered URL has a JSON 403", func(t *testing.T) {
		t.Parallel()
		got := doGet(t, http.MethodGet, flipSignature(t, getURL))
		require.Equal(t, http.StatusForbidden, got.status)
		requireJSONError(t, got, "SignatureInvalid")
	})
	t.Run("changed content type in the URL is 403", func(t *testing.T) {
		t.Parallel()
		pu, err := url.Parse(putURL)
		require.NoError(t, err)
		q := pu.Query()
		q.Set(queryContentType, "text/html")
		pu.RawQuery = q.Encode()
		got := doPut(t, pu.String(), "text/html", "", []byte("<script>"))
		require.Equal(t, http.StatusForbidden, got.status)
		requireJSONError(t, got, "SignatureInvalid")
	})
	t.Run("non-numeric expiry is 403", func(t *testing.T) {
		t.Parallel()
		q := u.Query()
		q.Set(queryExpires, "soon")
		got := doGet(t, http.MethodGet, base+strings.TrimPrefix(u.EscapedPath(), b.local.MountPath())+"?"+q.Encode())
		require.Equal(t, http.StatusForbidden, got.status)
	})
	t.Run("unknown method is 405", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, getURL, strings.NewReader("x"))
		require.NoError(t, err)
		got := do(t, req)
		require.Equal(t, http.StatusMethodNotAllowed, got.status)
		require.Contains(t, got.header.Get("Allow"), "PUT")
		requireJSONError(t, got, "MethodNotAllowed")
	})
	t.Run("malformed paths are 404", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"", "onlyonesegment", "!!!notbase64/x", "AAAA"} {
			got := doGet(t, http.MethodGet, base+p+"?"+u.RawQuery)
			require.Equal(t, http.StatusNotFound, got.status, "path %q", p)
		}
	})
	t.Run("too large is 413", func(t *testing.T) {
		t.Parallel()
		got := doPut(t, putURL, "text/plain", "", []byte("eleven byte"))
		require.Equal(t, http.StatusRequestEntityTooLarge, got.status)
		requireJSONError(t, got, "PayloadTooLarge")
	})
	t.Run("no Content-Length header is 411", func(t *testing.T) {
		t.Parallel()
		// Neither Content-Length nor chunked: net/http sees an empty body.
		status := rawPut(t, putURL, "Content-Type: text/plain\r\n", nil)
		require.Equal(t, http.StatusLengthRequired, status)
	})
	t.Run("preflight", func(t *testing.T) {
		t.Parallel()
		got := doGet(t, http.MethodOptions, putURL)
		require.Equal(t, http.StatusNoContent, got.status)
		require.Equal(t, "*", got.header.Get("Access-Control-Allow-Origin"))
		require.Contains(t, got.header.Get("Access-Control-Allow-Methods"), "PUT")
	})
}

func requireJSONError(t *testing.T, got response, code string) {
	t.Helper()
	require.Equal(t, "application/json; charset=utf-8", got.header.Get("Content-Type"))
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(got.body, &body), "body %q", got.body)
	require.Equal(t, code, body.Code)
	require.NotEmpty(t, body.Message)
}

func TestLocalDownloadHeaders(t *testing.T) {
	t.Parallel()
	b := setupLocal(t, nil)
	ctx := t.Context()
	key := "Task/0/public/report.html"
	body := []byte("<html><script>alert(1)</script></html>")
	putURL, err := b.local.PutURL(ctx, key, "text/html", b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	put := doPut(t, putURL, "text/html", "", body)
	require.Equal(t, http.StatusOK, put.status)
	require.Equal(t, `"`+sha256Hex(body)+`"`, put.header.Get("ETag"))

	getURL, err := b.local.GetURL(ctx, key, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	got := doGet(t, http.MethodGet, getURL)
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, "nosniff", got.header.Get("X-Content-Type-Options"))
	require.Contains(t, got.header.Get("Content-Security-Policy"), "sandbox")
	require.Equal(t, "*", got.header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, `"`+sha256Hex(body)+`"`, got.header.Get("ETag"))

	t.Run("range", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, getURL, nil)
		require.NoError(t, err)
		req.Header.Set("Range", "bytes=6-13")
		got := do(t, req)
		require.Equal(t, http.StatusPartialContent, got.status)
		require.Equal(t, "<script>", string(got.body))
	})
	t.Run("range of an encoded blob has a length", func(t *testing.T) {
		t.Parallel()
		key := "Task/0/public/live.log"
		gz := gzipBytes(t, bytes.Repeat([]byte("line\n"), 100))
		info, err := b.local.Put(t.Context(), key, "text/plain", "gzip", int64(len(gz)), bytes.NewReader(gz))
		require.NoError(t, err)
		require.Equal(t, int64(len(gz)), info.Size)
		u, err := b.local.GetURL(t.Context(), key, b.clock.Now().Add(time.Hour))
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		require.NoError(t, err)
		req.Header.Set("Range", "bytes=2-9")
		got := do(t, req)
		require.Equal(t, http.StatusPartialContent, got.status)
		require.Equal(t, "8", got.header.Get("Content-Length"))
		require.Equal(t, "gzip", got.header.Get("Content-Encoding"))
		require.Equal(t, gz[2:10], got.body)
	})
	t.Run("conditional", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, getURL, nil)
		require.NoError(t, err)
		req.Header.Set("If-None-Match", `"`+sha256Hex(body)+`"`)
		require.Equal(t, http.StatusNotModified, do(t, req).status)
	})
}

// TestLocalConcurrentUploads races uploads of one key: afterwards exactly
// one complete version must be visible and no data file may be orphaned.
func TestLocalConcurrentUploads(t *testing.T) {
	t.Parallel()
	b := setupLocal(t, nil)
	ctx := t.Context()
	key := "Task/0/public/raced.bin"
	putURL, err := b.local.PutURL(ctx, key, "application/binary", b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	getURL, err := b.local.GetURL(ctx, key, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)

	const writers = 8
	bodies := make(map[string]bool, writers)
	var wg sync.WaitGroup
	var readerErrs atomic.Int64
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		// Readers during the race must always see a body matching its ETag.
		defer close(readerDone)
		client := testClient()
		defer client.CloseIdleConnections()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := client.Get(getURL)
			if err != nil {
				readerErrs.Add(1)
				continue
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || resp.StatusCode == http.StatusOK && `"`+sha256Hex(body)+`"` != resp.Header.Get("ETag") {
				readerErrs.Add(1)
			}
		}
	}()
	for i := range writers {
		body := bytes.Repeat([]byte{byte('a' + i)}, 512<<10+i)
		bodies[sha256Hex(body)] = true
		wg.Go(func() {
			resp := doPut(t, putURL, "application/binary", "", body)
			require.Equal(t, http.StatusOK, resp.status)
		})
	}
	wg.Wait()
	close(stop)
	<-readerDone

	require.Zero(t, readerErrs.Load(), "a reader saw bytes inconsistent with their metadata")
	info, err := b.local.Stat(ctx, key)
	require.NoError(t, err)
	require.True(t, bodies[info.SHA256], "stored blob is none of the uploads")
	got := doGet(t, http.MethodGet, getURL)
	require.Equal(t, info.SHA256, sha256Hex(got.body))

	h := keyHash(key)
	data, err := filepath.Glob(filepath.Join(b.dir, "blobs", h[:2], h+".*.data"))
	require.NoError(t, err)
	require.Len(t, data, 1, "replaced versions must be deleted")
	tmp, err := os.ReadDir(filepath.Join(b.dir, "tmp"))
	require.NoError(t, err)
	require.Empty(t, tmp)
}

func TestLocalPut(t *testing.T) {
	t.Parallel()
	b := setupLocal(t, nil)
	ctx := t.Context()
	tests := []struct {
		name    string
		size    int64
		reader  io.Reader
		want    string
		wantErr error
	}{
		{"exact", 5, strings.NewReader("hello"), "hello", nil},
		{"longer reader is cut at size", 3, strings.NewReader("hello"), "hel", nil},
		{"short reader fails", 10, strings.NewReader("hello"), "", io.ErrUnexpectedEOF},
		{"failing reader", 10, io.MultiReader(strings.NewReader("he"), errReader{}), "", errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := newKey(t, "put.txt")
			info, err := b.local.Put(ctx, key, "text/plain", "", tt.size, tt.reader)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				_, err := b.local.Stat(ctx, key)
				require.ErrorIs(t, err, ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, sha256Hex([]byte(tt.want)), info.SHA256)
			f, _, err := b.local.open(key)
			require.NoError(t, err)
			defer f.Close()
			got, err := io.ReadAll(f)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
		})
	}

	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := b.local.Put(cctx, newKey(t, "c"), "text/plain", "", 3, strings.NewReader("abc"))
		require.ErrorIs(t, err, context.Canceled)
	})
}

var errBoom = fmt.Errorf("boom")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBoom }

// TestLocalCorruptMetadata checks that a damaged sidecar is reported, not
// trusted, and that a new upload repairs it.
func TestLocalCorruptMetadata(t *testing.T) {
	t.Parallel()
	b := setupLocal(t, nil)
	ctx := t.Context()
	key := "Task/0/public/corrupt.txt"
	_, err := b.local.Put(ctx, key, "text/plain", "", 2, strings.NewReader("ok"))
	require.NoError(t, err)
	h := keyHash(key)
	require.NoError(t, os.WriteFile(b.local.metaPath(h), []byte(`{"key":"Task/0/public/corrupt.txt","version":"../../../etc/passwd"}`), 0o600))
	_, err = b.local.Stat(ctx, key)
	require.ErrorContains(t, err, "inconsistent")
	require.NotErrorIs(t, err, ErrNotFound)

	getURL, err := b.local.GetURL(ctx, key, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, doGet(t, http.MethodGet, getURL).status)

	_, err = b.local.Put(ctx, key, "text/plain", "", 5, strings.NewReader("fixed"))
	require.NoError(t, err)
	got := doGet(t, http.MethodGet, getURL)
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, "fixed", string(got.body))
}

func TestLocalSweepsStaleTemporaryFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.MkdirAll(tmp, 0o750))
	stale := filepath.Join(tmp, "upload-stale")
	fresh := filepath.Join(tmp, "upload-fresh")
	for _, p := range []string{stale, fresh} {
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
	}
	old := time.Now().Add(-25 * time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	_, err := NewLocal(LocalOptions{Dir: dir, BaseURL: "http://127.0.0.1:1", SigningKey: bytes.Repeat([]byte("k"), MinSigningKeyLen)})
	require.NoError(t, err)
	_, err = os.Stat(stale)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(fresh)
	require.NoError(t, err, "a recent temporary file may be an upload in progress")
}
