package artifacts

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// harness is what the behavioural suite needs from one backend.
type harness struct {
	backend Backend
	// shortExpiry returns an expiry for URLs the test will then let lapse
	// with expire, which is handed a GET URL signed with that expiry: a
	// backend on another clock waits until the URL is refused.
	shortExpiry func() time.Time
	expire      func(t *testing.T, getURL string)
	// headOnGetURL says whether GET URLs also answer HEAD.
	headOnGetURL bool
	// checkRefused checks the status of a request the backend must refuse
	// for a reason other than an expired or wrongly signed URL (those are
	// 403 everywhere): requireStatus where the backend's codes are ours,
	// requireClientError for third-party servers.
	checkRefused func(t *testing.T, want, got int, msgAndArgs ...any)
}

func requireStatus(t *testing.T, want, got int, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want, got, msgAndArgs...)
}

func requireClientError(t *testing.T, _ int, got int, msgAndArgs ...any) {
	t.Helper()
	require.GreaterOrEqual(t, got, 400, msgAndArgs...)
	require.Less(t, got, 500, msgAndArgs...)
}

// runBackendSuite runs the behaviour every Backend must show. newHarness is
// called once per subtest so that clocks can be advanced independently.
func runBackendSuite(t *testing.T, newHarness func(t *testing.T) harness) {
	t.Helper()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		tests := []struct {
			name            string
			contentType     string
			contentEncoding string
			body            []byte
		}{
			{"text", "text/plain; charset=utf-8", "", []byte("hello, world\n")},
			{"gzipped log", "text/plain; charset=utf-8", "gzip", gzipBytes(t, bytes.Repeat([]byte("log line\n"), 1000))},
			{"binary", "application/octet-stream", "", randomBytes(t, 3<<20+17)},
			{"empty", "application/binary", "", []byte{}},
			{"json with odd type", "application/vnd.hopper+json; v=1", "identity", []byte(`{"a":1}`)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				key := newKey(t, "public/"+strings.ReplaceAll(tt.name, " ", "_"))
				putURL, err := h.backend.PutURL(ctx, key, tt.contentType, time.Now().Add(time.Hour))
				require.NoError(t, err)
				resp := doPut(t, putURL, tt.contentType, tt.contentEncoding, tt.body)
				require.Equal(t, http.StatusOK, resp.status, "PUT answered %s", resp.body)

				info, err := h.backend.Stat(ctx, key)
				require.NoError(t, err)
				require.Equal(t, int64(len(tt.body)), info.Size)
				require.Equal(t, tt.contentType, info.ContentType)
				require.Equal(t, tt.contentEncoding, info.ContentEncoding)
				if info.SHA256 != "" {
					require.Equal(t, sha256Hex(tt.body), info.SHA256)
				}
				require.WithinDuration(t, time.Now(), info.Modified, 10*time.Minute)

				getURL, err := h.backend.GetURL(ctx, key, time.Now().Add(time.Hour))
				require.NoError(t, err)
				got := doGet(t, http.MethodGet, getURL)
				require.Equal(t, http.StatusOK, got.status, "GET answered %s", got.body)
				require.True(t, bytes.Equal(tt.body, got.body), "downloaded bytes differ from uploaded ones")
				require.Equal(t, tt.contentType, got.header.Get("Content-Type"))
				require.Equal(t, tt.contentEncoding, got.header.Get("Content-Encoding"))
				require.Equal(t, fmt.Sprint(len(tt.body)), got.header.Get("Content-Length"))

				if h.headOnGetURL {
					head := doGet(t, http.MethodHead, getURL)
					require.Equal(t, http.StatusOK, head.status)
					require.Empty(t, head.body)
					require.Equal(t, tt.contentType, head.header.Get("Content-Type"))
					require.Equal(t, tt.contentEncoding, head.header.Get("Content-Encoding"))
					require.Equal(t, fmt.Sprint(len(tt.body)), head.header.Get("Content-Length"))
				}
			})
		}
	})

	t.Run("HostileNamesStayDistinct", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		prefix := newKey(t, "")
		// Pairs that path cleaning or percent-decoding would merge must
		// stay separate blobs.
		names := []string{
			"b", "a/../b", "..", "../../etc/passwd", "../../../../../../tmp/escape",
			"%2e%2e", "%2e%2e/%2e%2e/etc/passwd", "%2F", "a%2Fb", "a/b", "a//b", "/a/b", "a/b/",
			".", "./b", "...", " .. ", "back\\slash", "..\\..\\win", "sp ace/q?x=1#frag&y=+",
			"%00", "semi;colon:at@", "~tilde'quote\"", "<>|*", "unicodé/ñ",
		}
		for i, name := range names {
			key := prefix + name
			putURL, err := h.backend.PutURL(ctx, key, "text/plain", time.Now().Add(time.Hour))
			require.NoError(t, err, "name %q", name)
			resp := doPut(t, putURL, "text/plain", "", []byte(fmt.Sprintf("blob %d: %s", i, name)))
			require.Equal(t, http.StatusOK, resp.status, "PUT of %q answered %s", name, resp.body)
		}
		for i, name := range names {
			key := prefix + name
			getURL, err := h.backend.GetURL(ctx, key, time.Now().Add(time.Hour))
			require.NoError(t, err)
			got := doGet(t, http.MethodGet, getURL)
			require.Equal(t, http.StatusOK, got.status, "GET of %q answered %s", name, got.body)
			require.Equal(t, fmt.Sprintf("blob %d: %s", i, name), string(got.body), "name %q", name)
		}
	})

	t.Run("LastWriteWins", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		key := newKey(t, "public/logs/live.log")
		putURL, err := h.backend.PutURL(ctx, key, "text/plain", time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, doPut(t, putURL, "text/plain", "", []byte("first, longer version")).status)
		require.Equal(t, http.StatusOK, doPut(t, putURL, "text/plain", "gzip", gzipBytes(t, []byte("second"))).status)

		info, err := h.backend.Stat(ctx, key)
		require.NoError(t, err)
		require.Equal(t, "gzip", info.ContentEncoding)
		getURL, err := h.backend.GetURL(ctx, key, time.Now().Add(time.Hour))
		require.NoError(t, err)
		got := doGet(t, http.MethodGet, getURL)
		require.Equal(t, http.StatusOK, got.status)
		require.Equal(t, gzipBytes(t, []byte("second")), got.body)
		require.Equal(t, "gzip", got.header.Get("Content-Encoding"))
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		key := newKey(t, "public/to-delete.txt")
		putURL, err := h.backend.PutURL(ctx, key, "text/plain", time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, doPut(t, putURL, "text/plain", "", []byte("doomed")).status)
		getURL, err := h.backend.GetURL(ctx, key, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, doGet(t, http.MethodGet, getURL).status)

		require.NoError(t, h.backend.Delete(ctx, key))
		_, err = h.backend.Stat(ctx, key)
		require.ErrorIs(t, err, ErrNotFound)
		require.Equal(t, http.StatusNotFound, doGet(t, http.MethodGet, getURL).status)
		require.NoError(t, h.backend.Delete(ctx, key), "deleting twice")
		require.NoError(t, h.backend.Delete(ctx, newKey(t, "never-existed")))
	})

	t.Run("StatMissing", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		_, err := h.backend.Stat(t.Context(), newKey(t, "missing"))
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("ExpiredURLs", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		key := newKey(t, "public/expiring.bin")
		// Stored beforehand so that a 403 can only come from the expiry.
		longPut, err := h.backend.PutURL(ctx, key, "application/binary", time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, doPut(t, longPut, "application/binary", "", []byte("data")).status)

		putURL, err := h.backend.PutURL(ctx, key, "application/binary", h.shortExpiry())
		require.NoError(t, err)
		getURL, err := h.backend.GetURL(ctx, key, h.shortExpiry())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, doGet(t, http.MethodGet, getURL).status, "before expiry")
		h.expire(t, getURL)
		require.Equal(t, http.StatusForbidden, doPut(t, putURL, "application/binary", "", []byte("late")).status)
		require.Equal(t, http.StatusForbidden, doGet(t, http.MethodGet, getURL).status)

		info, err := h.backend.Stat(ctx, key)
		require.NoError(t, err)
		require.Equal(t, int64(4), info.Size, "the expired PUT must not have stored anything")
	})

	t.Run("TamperedURLs", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		keyA := newKey(t, "private/a.txt")
		keyB := newKey(t, "private/b.txt")
		exp := time.Now().Add(time.Hour)
		for _, k := range []string{keyA, keyB} {
			u, err := h.backend.PutURL(ctx, k, "text/plain", exp)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, doPut(t, u, "text/plain", "", []byte("secret "+k)).status)
		}
		putA, err := h.backend.PutURL(ctx, keyA, "text/plain", exp)
		require.NoError(t, err)
		getA, err := h.backend.GetURL(ctx, keyA, exp)
		require.NoError(t, err)
		getB, err := h.backend.GetURL(ctx, keyB, exp)
		require.NoError(t, err)

		tests := []struct {
			name   string
			method string
			url    string
			// malformed marks requests a server may call malformed
			// rather than forbidden.
			malformed bool
		}{
			{"signature flipped", http.MethodGet, flipSignature(t, getA), false},
			{"signature removed", http.MethodGet, dropSignature(t, getA), true},
			{"path of another key", http.MethodGet, swapPath(t, getA, getB), false},
			{"expiry extended", http.MethodGet, extendExpiry(t, getA), false},
			{"PUT URL used to GET", http.MethodGet, putA, true},
			{"GET URL used to PUT", http.MethodPut, getA, false},
			{"PUT URL for another key", http.MethodPut, swapPath(t, putA, getB), false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				var status int
				if tt.method == http.MethodPut {
					status = doPut(t, tt.url, "text/plain", "", []byte("overwritten")).status
				} else {
					status = doGet(t, tt.method, tt.url).status
				}
				if tt.malformed {
					h.checkRefused(t, http.StatusForbidden, status)
				} else {
					require.Equal(t, http.StatusForbidden, status)
				}
			})
		}
		t.Cleanup(func() {
			// Nothing above may have overwritten either blob.
			for _, k := range []string{keyA, keyB} {
				u, err := h.backend.GetURL(context.Background(), k, time.Now().Add(time.Hour))
				require.NoError(t, err)
				got := doGet(t, http.MethodGet, u)
				require.Equal(t, "secret "+k, string(got.body))
			}
		})
	})

	t.Run("WrongContentType", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		key := newKey(t, "public/typed.log")
		putURL, err := h.backend.PutURL(ctx, key, "text/plain; charset=utf-8", time.Now().Add(time.Hour))
		require.NoError(t, err)
		for _, ct := range []string{"text/plain", "application/octet-stream", "text/plain; charset=UTF-8", ""} {
			resp := doPut(t, putURL, ct, "", []byte("mistyped"))
			h.checkRefused(t, http.StatusBadRequest, resp.status, "Content-Type %q answered %s", ct, resp.body)
		}
		_, err = h.backend.Stat(ctx, key)
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("ShortBody", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		key := newKey(t, "public/short.bin")
		putURL, err := h.backend.PutURL(ctx, key, "application/binary", time.Now().Add(time.Hour))
		require.NoError(t, err)
		// Declares 100 bytes, sends 40, then half-closes the connection.
		status := rawPut(t, putURL, "Content-Type: application/binary\r\nContent-Length: 100\r\n", bytes.Repeat([]byte("x"), 40))
		h.checkRefused(t, http.StatusBadRequest, status)
		_, err = h.backend.Stat(ctx, key)
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("MissingContentLength", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		key := newKey(t, "public/chunked.bin")
		putURL, err := h.backend.PutURL(ctx, key, "application/binary", time.Now().Add(time.Hour))
		require.NoError(t, err)
		chunked := rawPut(t, putURL, "Content-Type: application/binary\r\nTransfer-Encoding: chunked\r\n", []byte("5\r\nhello\r\n0\r\n\r\n"))
		h.checkRefused(t, http.StatusLengthRequired, chunked)
		_, err = h.backend.Stat(ctx, key)
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("InvalidKeysAndExpiries", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		exp := time.Now().Add(time.Hour)
		for _, key := range []string{"", "task/0/nul\x00byte", "task/0/\xff\xfe", "task/0/" + strings.Repeat("x", MaxKeyLen)} {
			_, err := h.backend.PutURL(ctx, key, "text/plain", exp)
			require.ErrorIs(t, err, ErrInvalidKey)
			_, err = h.backend.GetURL(ctx, key, exp)
			require.ErrorIs(t, err, ErrInvalidKey)
			_, err = h.backend.Stat(ctx, key)
			require.ErrorIs(t, err, ErrInvalidKey)
			require.ErrorIs(t, h.backend.Delete(ctx, key), ErrInvalidKey)
		}
		key := newKey(t, "x")
		_, err := h.backend.PutURL(ctx, key, "text/plain", time.Now().Add(-time.Minute))
		require.Error(t, err, "expiry in the past")
		_, err = h.backend.GetURL(ctx, key, time.Now().Add(-time.Minute))
		require.Error(t, err, "expiry in the past")
		_, err = h.backend.PutURL(ctx, key, "", exp)
		require.Error(t, err, "empty content type")
		_, err = h.backend.PutURL(ctx, key, "text/plain\r\nX-Evil: 1", exp)
		require.Error(t, err, "content type with a line break")
	})
}

// response is the part of an HTTP answer the tests look at.
type response struct {
	status int
	header http.Header
	body   []byte
}

// testClient never decompresses, so that stored Content-Encoding and bytes
// can be compared exactly.
func testClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{DisableCompression: true},
		Timeout:   time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func doPut(t *testing.T, rawURL, contentType, contentEncoding string, body []byte) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, rawURL, bytes.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if contentEncoding != "" {
		req.Header.Set("Content-Encoding", contentEncoding)
	}
	return do(t, req)
}

func doGet(t *testing.T, method, rawURL string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.WithoutCancel(t.Context()), method, rawURL, nil)
	require.NoError(t, err)
	return do(t, req)
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	client := testClient()
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// rawPut sends a hand-written PUT request (headers must end in CRLF) with
// body, half-closes the connection and returns the status code; it lets
// tests send what net/http's client refuses to (lying Content-Length).
func rawPut(t *testing.T, rawURL, headers string, body []byte) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\n", u.RequestURI(), u.Host, headers)
	require.NoError(t, err)
	_, err = conn.Write(body)
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// The tamper helpers below work on either backend's URLs: Local's
// "signature"/"expires" and SigV4's "X-Amz-Signature"/"X-Amz-Expires".

func signatureParam(q url.Values) string {
	if q.Has("X-Amz-Signature") {
		return "X-Amz-Signature"
	}
	return querySignature
}

func flipSignature(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	q := u.Query()
	p := signatureParam(q)
	sig := []byte(q.Get(p))
	require.NotEmpty(t, sig)
	// Change the first character: in base64 the last one may carry
	// padding bits that decoders ignore.
	if sig[0] == 'a' {
		sig[0] = 'b'
	} else {
		sig[0] = 'a'
	}
	q.Set(p, string(sig))
	u.RawQuery = q.Encode()
	return u.String()
}

func dropSignature(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	q := u.Query()
	q.Del(signatureParam(q))
	u.RawQuery = q.Encode()
	return u.String()
}

func extendExpiry(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	q := u.Query()
	if q.Has("X-Amz-Expires") {
		q.Set("X-Amz-Expires", "604800")
	} else {
		q.Set(queryExpires, fmt.Sprint(time.Now().Add(48*time.Hour).Unix()))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// swapPath returns signed's query string on other's path.
func swapPath(t *testing.T, signed, other string) string {
	t.Helper()
	s, err := url.Parse(signed)
	require.NoError(t, err)
	o, err := url.Parse(other)
	require.NoError(t, err)
	s.Path, s.RawPath = o.Path, o.RawPath
	return s.String()
}

// newKey returns a key under a task ID unique to this call.
func newKey(t *testing.T, name string) string {
	t.Helper()
	var b [12]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:]) + "/0/" + name
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
