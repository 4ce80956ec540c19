package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// artifactSecretKey is the server secret of the artifact tests' servers:
// knowing it lets a test mint blob URLs exactly as the server would (an
// already-expired one, for instance).
const artifactSecretKey = "5c0f6e1d2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"

// blobBackend is one of the two blob stores a server can run with.
type blobBackend struct {
	name string
	// spec is the --artifacts value ("" = local under --data-dir).
	spec string
}

// blobBackends returns the local backend and, when HOPPER_TEST_S3 names a
// reachable S3-compatible service, the S3 one.
func blobBackends() []blobBackend {
	return []blobBackend{{name: "local"}, {name: "s3", spec: os.Getenv("HOPPER_TEST_S3")}}
}

// start runs `hopper serve` on this backend, skipping the test for s3 when
// no S3 service is configured.
func (b blobBackend) start(t testing.TB, args ...string) *e2e.Server {
	t.Helper()
	if b.name == "s3" && b.spec == "" {
		t.Skip(`HOPPER_TEST_S3 not set: start MinIO with eval "$(.ci/minio.sh)" to run the S3 variant`)
	}
	if b.spec != "" {
		args = append(args, "--artifacts", b.spec)
	}
	return e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: []string{"HOPPER_SECRET_KEY=" + artifactSecretKey}})
}

// urlPrefix is where the backend's upload and download URLs point: hopper's
// own blob endpoint, or the S3 service itself.
func (b blobBackend) urlPrefix(t *testing.T, srv *e2e.Server) string {
	t.Helper()
	if b.spec == "" {
		return srv.RootURL + artifacts.DefaultMountPath
	}
	u, err := url.Parse(b.spec)
	require.NoError(t, err)
	q := u.Query()
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = "s3.amazonaws.com"
	}
	scheme := "https"
	if q.Get("insecure") == "true" {
		scheme = "http"
	}
	return scheme + "://" + endpoint + "/"
}

// storage opens a second handle on the blob store the server uses, to look
// behind its back: whether a blob is (still) stored.
func (b blobBackend) storage(t *testing.T, srv *e2e.Server) artifacts.Backend {
	t.Helper()
	key, err := hex.DecodeString(artifactSecretKey)
	require.NoError(t, err)
	be, err := artifacts.Open(context.Background(), b.spec, artifacts.Options{Local: artifacts.LocalOptions{
		Dir: filepath.Join(srv.DataDir, "blobs"), BaseURL: srv.RootURL, SigningKey: key,
	}})
	require.NoError(t, err)
	return be
}

// TestOfficialClientArtifacts runs e2e/node/artifacts.mjs — every storage
// type created by a claimed run with the npm taskcluster-client, bytes
// uploaded to the putUrl with plain HTTP and compared after download, read
// scopes, signed URLs, paging, re-creation and the upload window — against
// the built-in blob store and against S3 (MinIO).
func TestOfficialClientArtifacts(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	for _, b := range blobBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := b.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			env := append(srv.Env(), "HOPPER_BACKEND="+b.name, "HOPPER_BLOB_URL_PREFIX="+b.urlPrefix(t, srv))
			out := e2e.RunNode(ctx, t, "artifacts.mjs", env...)
			require.Contains(t, out, fmt.Sprintf("artifacts (%s): all passed", b.name))
			t.Log(out)
		})
	}
}

// claimed is a task claimed by a worker: root talks as the root client,
// worker with the claim's credentials.
type claimed struct {
	root, worker *tcclient.Client
	taskID       string
}

// claimTask creates a task on a fresh queue (def may adjust it) and claims
// it.
func claimTask(ctx context.Context, t testing.TB, srv *e2e.Server, def func(*tcclient.TaskDefinition)) *claimed {
	t.Helper()
	root := rootClient(srv)
	root.MaxRetries = -1
	// A queue per task, so that claimWork returns exactly this one; the
	// worker-type half must be lower-case.
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	q := "e2e-artifacts/q" + hex.EncodeToString(suffix[:])
	task := newTask(q)
	if def != nil {
		def(task)
	}
	taskID := tcclient.NewTaskID()
	_, err := root.CreateTask(ctx, taskID, task)
	require.NoError(t, err)
	res, err := root.ClaimWork(ctx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
	require.Equal(t, taskID, res.Tasks[0].Status.TaskID)
	creds := res.Tasks[0].Credentials
	return &claimed{root: root, worker: root.WithCredentials(&creds), taskID: taskID}
}

// upload creates an s3 artifact and PUTs body to its putUrl.
func (c *claimed) upload(ctx context.Context, t testing.TB, name, contentType string, body []byte) *tcclient.CreateArtifactResponse {
	t.Helper()
	res, err := c.worker.CreateArtifact(ctx, c.taskID, 0, name, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, Expires: tcclient.NewTime(time.Now().Add(time.Hour)), ContentType: contentType,
	})
	require.NoError(t, err)
	up := tcclient.BytesUpload(res.PutURL, contentType, "", body)
	up.MaxRetries = -1
	require.NoError(t, up.Do(ctx), "uploading %q", name)
	return res
}

// download fetches an artifact through getArtifact's URL.
func (c *claimed) download(ctx context.Context, t testing.TB, name string) (*http.Response, []byte) {
	t.Helper()
	loc, err := c.root.GetArtifact(ctx, c.taskID, 0, name)
	require.NoError(t, err, "getArtifact %q", name)
	require.Equal(t, loc.URL, loc.Location)
	return httpDo(ctx, t, http.MethodGet, loc.URL, "", nil)
}

// runContext is a context with the given time to run, counted from now:
// a parallel subtest calls it after t.Parallel returns, once it runs, so
// that waiting for a parallel slot does not spend its time.
func runContext(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// httpDo performs one plain HTTP request and reads the whole reply.
func httpDo(ctx context.Context, t testing.TB, method, rawURL, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, bytes.NewReader(body))
	require.NoError(t, err)
	if body == nil {
		req.Body = http.NoBody
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

// rawPut sends a PUT whose Content-Length header says declared while body
// holds however many bytes it holds, then half-closes the connection so
// that the server sees the end of the body — something net/http's client
// refuses to do.
func rawPut(t *testing.T, rawURL, contentType string, declared int, body []byte) (int, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	var req bytes.Buffer
	fmt.Fprintf(&req, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		u.RequestURI(), u.Host, contentType, declared)
	req.Write(body)
	_, err = conn.Write(req.Bytes())
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(msg)
}

// mutateQuery returns rawURL with its query changed by f.
func mutateQuery(t *testing.T, rawURL string, f func(url.Values)) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	q := u.Query()
	f(q)
	u.RawQuery = q.Encode()
	return u.String()
}

// withKeySegment returns a local blob URL with its key segment (the first
// path segment after the mount) replaced, signature untouched.
func withKeySegment(t *testing.T, rawURL, segment string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	rest, ok := strings.CutPrefix(u.EscapedPath(), artifacts.DefaultMountPath)
	require.True(t, ok, "%s is not a local blob URL", rawURL)
	_, display, ok := strings.Cut(rest, "/")
	require.True(t, ok)
	u2, err := url.Parse(u.Scheme + "://" + u.Host + artifacts.DefaultMountPath + segment + "/" + display + "?" + u.RawQuery)
	require.NoError(t, err)
	return u2.String()
}

// TestArtifactBlobURLsRefuseTampering attacks the built-in store's signed
// URLs through the running server: altered signatures, expiries, keys,
// methods and content types, and URLs that have expired, all answer 403
// and change nothing; and uploads whose length is wrong are refused
// without replacing what was stored.
func TestArtifactBlobURLsRefuseTampering(t *testing.T) {
	t.Parallel()
	b := blobBackends()[0]
	srv := b.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := claimTask(ctx, t, srv, nil)
	const ct = "application/octet-stream"
	original := make([]byte, 64<<10)
	_, _ = rand.Read(original)
	created := c.upload(ctx, t, "public/target.bin", ct, original)
	putURL := created.PutURL
	loc, err := c.root.GetArtifact(ctx, c.taskID, 0, "public/target.bin")
	require.NoError(t, err)
	getURL := loc.URL
	c.upload(ctx, t, "public/other.bin", ct, []byte("other"))

	// A clone of the server's store, signing with the same key but a clock
	// two hours behind, mints URLs that expired an hour ago.
	key, err := hex.DecodeString(artifactSecretKey)
	require.NoError(t, err)
	past := time.Now().Add(-2 * time.Hour)
	minter, err := artifacts.NewLocal(artifacts.LocalOptions{Dir: t.TempDir(), BaseURL: srv.RootURL, SigningKey: key,
		NowFunc: func() time.Time { return past }})
	require.NoError(t, err)
	blobKey := artifacts.BlobKey(c.taskID, 0, "public/target.bin")
	expiredGet, err := minter.GetURL(ctx, blobKey, past.Add(time.Hour))
	require.NoError(t, err)
	expiredPut, err := minter.PutURL(ctx, blobKey, ct, past.Add(time.Hour))
	require.NoError(t, err)
	// The same minter with a fresh expiry proves the forged URLs are
	// refused for their age alone.
	minter2, err := artifacts.NewLocal(artifacts.LocalOptions{Dir: t.TempDir(), BaseURL: srv.RootURL, SigningKey: key})
	require.NoError(t, err)
	freshGet, err := minter2.GetURL(ctx, blobKey, time.Now().Add(time.Minute))
	require.NoError(t, err)

	flipSignature := func(q url.Values) {
		sig, err := base64.RawURLEncoding.DecodeString(q.Get("signature"))
		require.NoError(t, err)
		sig[len(sig)/2] ^= 0x01
		q.Set("signature", base64.RawURLEncoding.EncodeToString(sig))
	}
	extend := func(q url.Values) {
		n, err := strconv.ParseInt(q.Get("expires"), 10, 64)
		require.NoError(t, err)
		q.Set("expires", strconv.FormatInt(n+3600, 10))
	}
	otherKeySegment := base64.RawURLEncoding.EncodeToString([]byte(artifacts.BlobKey(c.taskID, 0, "public/other.bin")))

	cases := []struct {
		name        string
		method, url string
		contentType string
		body        []byte
		want        int
		wantCode    string
	}{
		{"valid GET (control)", http.MethodGet, getURL, "", nil, http.StatusOK, ""},
		{"freshly minted GET (control)", http.MethodGet, freshGet, "", nil, http.StatusOK, ""},
		{"GET with a flipped signature bit", http.MethodGet, mutateQuery(t, getURL, flipSignature), "", nil, http.StatusForbidden, "SignatureInvalid"},
		{"GET with a later expiry", http.MethodGet, mutateQuery(t, getURL, extend), "", nil, http.StatusForbidden, "SignatureInvalid"},
		{"GET without signature", http.MethodGet, mutateQuery(t, getURL, func(q url.Values) { q.Del("signature") }), "", nil, http.StatusForbidden, "SignatureInvalid"},
		{"GET without expiry", http.MethodGet, mutateQuery(t, getURL, func(q url.Values) { q.Del("expires") }), "", nil, http.StatusForbidden, "SignatureInvalid"},
		{"GET of another key with this signature", http.MethodGet, withKeySegment(t, getURL, otherKeySegment), "", nil, http.StatusForbidden, "SignatureInvalid"},
		{"GET with an undecodable key", http.MethodGet, withKeySegment(t, getURL, "..%2F..%2Fsecret.key"), "", nil, http.StatusNotFound, "ResourceNotFound"},
		{"GET through the upload URL", http.MethodGet, putURL, "", nil, http.StatusForbidden, "SignatureInvalid"},
		{"expired GET", http.MethodGet, expiredGet, "", nil, http.StatusForbidden, "UrlExpired"},
		{"PUT through the download URL", http.MethodPut, getURL, ct, []byte("evil"), http.StatusForbidden, "SignatureInvalid"},
		{"PUT with a flipped signature bit", http.MethodPut, mutateQuery(t, putURL, flipSignature), ct, []byte("evil"), http.StatusForbidden, "SignatureInvalid"},
		{"PUT with a later expiry", http.MethodPut, mutateQuery(t, putURL, extend), ct, []byte("evil"), http.StatusForbidden, "SignatureInvalid"},
		{"PUT with a re-signed content type", http.MethodPut, mutateQuery(t, putURL, func(q url.Values) { q.Set("contentType", "text/html") }), "text/html", []byte("<script>"), http.StatusForbidden, "SignatureInvalid"},
		{"PUT of another key with this signature", http.MethodPut, withKeySegment(t, putURL, otherKeySegment), ct, []byte("evil"), http.StatusForbidden, "SignatureInvalid"},
		{"PUT with another Content-Type header", http.MethodPut, putURL, "text/html", []byte("<script>"), http.StatusBadRequest, "InputError"},
		{"expired PUT", http.MethodPut, expiredPut, ct, []byte("evil"), http.StatusForbidden, "UrlExpired"},
	}
	// The attacks run one after another: each is a request of a
	// millisecond, and parallel subtests would wait for the package's
	// parallel slots (two on a 2-core machine, held by the long end-to-end
	// tests) while this test's minute ran out.
	t.Run("attacks", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := httpDo(ctx, t, tc.method, tc.url, tc.contentType, tc.body)
				require.Equal(t, tc.want, resp.StatusCode, "%s", body)
				if tc.want == http.StatusOK {
					require.Equal(t, original, body)
					return
				}
				require.Contains(t, string(body), `"code":"`+tc.wantCode+`"`)
				require.NotContains(t, string(body), "signature=", "the reply echoes the URL")
			})
		}
	})
	// Nothing above replaced the stored bytes.
	_, got := c.download(ctx, t, "public/target.bin")
	require.Equal(t, original, got)

	t.Run("wrong Content-Length", func(t *testing.T) {
		// A body that ends before its Content-Length is refused and the
		// previous upload stays in place: uploads commit atomically.
		status, msg := rawPut(t, putURL, ct, len(original)+100, original)
		require.Equal(t, http.StatusBadRequest, status, msg)
		require.Contains(t, msg, "shorter than its Content-Length")
		_, got := c.download(ctx, t, "public/target.bin")
		require.Equal(t, original, got)

		// A Content-Length the request does not carry at all (chunked
		// transfer) is refused too: the length is part of the contract.
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, putURL, io.NopCloser(bytes.NewReader([]byte("chunked body"))))
		require.NoError(t, err)
		req.ContentLength = -1
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusLengthRequired, resp.StatusCode)

		// Bytes beyond the declared length are not part of the upload: the
		// stored blob is exactly Content-Length bytes long.
		status, msg = rawPut(t, putURL, ct, 10, []byte("0123456789-trailing-garbage"))
		require.Equal(t, http.StatusOK, status, msg)
		resp2, got := c.download(ctx, t, "public/target.bin")
		require.Equal(t, []byte("0123456789"), got)
		require.Equal(t, "10", resp2.Header.Get("Content-Length"))
	})
}

// oddArtifactNames are legal artifact names that mean something to file
// systems or URLs; escapeMarker makes paths they could escape to unique.
// The names "." and ".." themselves are missing: clients substitute them
// into the URL unescaped (encodeURIComponent leaves dots alone), where they
// are dot segments that URL parsers and ServeMux remove, so no client can
// address them — in Taskcluster either.
func oddArtifactNames(escapeMarker string) []string {
	return []string{
		"public/../../../../../../../../tmp/" + escapeMarker,
		"../../" + escapeMarker,
		"../..",
		"./.",
		"public/..",
		"public/./dot",
		"public/a//b",
		"/public/leading-slash",
		"public/trailing-slash/",
		"public/%2e%2e/%2e%2e/" + escapeMarker,
		"public/..%2F..%2F" + escapeMarker,
		`public\..\..\` + escapeMarker,
		"public/q?x=1&y=2#frag",
		"public/~!*'();:@&=+$, []{}|^`\"<>",
		// Long, in segments every S3-compatible store accepts (MinIO limits
		// a segment to 255 bytes, AWS a whole key to 1024).
		"public/" + strings.Repeat(strings.Repeat("n", 200)+"/", 4) + "end",
	}
}

// TestArtifactOddNamesStayInTheStore creates artifacts whose names contain
// "..", "%", backslashes, empty segments and URL syntax on both backends:
// each round-trips byte for byte under its exact name, none lands outside
// the store (the local one holds only hash-named files), and names with
// bytes outside printable ASCII or longer than 1024 characters are refused.
func TestArtifactOddNamesStayInTheStore(t *testing.T) {
	t.Parallel()
	for _, b := range blobBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := b.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := claimTask(ctx, t, srv, nil)
			marker := "hopper-escape-" + strings.ToLower(tcclient.NewTaskID()[:10])
			names := oddArtifactNames(marker)
			if b.spec == "" {
				// The longest name allowed, as one segment: the local store
				// names files after a hash, so length does not matter to it.
				names = append(names, "public/"+strings.Repeat("n", 1017))
			}
			for i, name := range names {
				body := []byte(fmt.Sprintf("artifact %d named %q\n", i, name))
				res := c.upload(ctx, t, name, "text/plain", body)
				require.True(t, strings.HasPrefix(res.PutURL, b.urlPrefix(t, srv)), "putUrl %s", res.PutURL)
				resp, got := c.download(ctx, t, name)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%q: %s", name, got)
				require.Equal(t, body, got, "%q", name)
				var info tcclient.Artifact
				require.NoError(t, c.root.Do(ctx, http.MethodGet,
					"/task/"+c.taskID+"/runs/0/artifact-info/"+tcclient.EscapePathParam(name), nil, nil, &info), "%q", name)
				require.Equal(t, name, info.Name)
			}
			all, err := c.root.AllArtifacts(ctx, c.taskID, 0)
			require.NoError(t, err)
			var listed []string
			for _, a := range all {
				listed = append(listed, a.Name)
			}
			require.ElementsMatch(t, names, listed)

			for _, dir := range []string{"/tmp", os.TempDir(), filepath.Dir(srv.DataDir), srv.DataDir} {
				_, err := os.Stat(filepath.Join(dir, marker))
				require.ErrorIs(t, err, fs.ErrNotExist, "an artifact escaped to %s", dir)
			}
			if b.spec == "" {
				requireOnlyHashedBlobs(t, srv.DataDir, len(names))
			}

			rejected := []string{"public/\x00nul", "public/\x01ctl", "public/tab\there", "public/new\nline", "public/del\x7f",
				"public/ü", "public/" + strings.Repeat("n", 1018)}
			for _, name := range rejected {
				_, err := c.worker.CreateArtifact(ctx, c.taskID, 0, name, &tcclient.CreateArtifactRequest{
					StorageType: tcclient.StorageS3, Expires: tcclient.NewTime(time.Now().Add(time.Hour)), ContentType: "text/plain",
				})
				require.Equal(t, http.StatusBadRequest, tcclient.StatusCode(err), "%q: %v", name, err)
			}
		})
	}
}

// blobFile is the only shape of file the local store may create under
// <data-dir>/blobs/blobs: metadata or data named after the key's hash.
var blobFile = regexp.MustCompile(`^blobs/blobs/[0-9a-f]{2}/[0-9a-f]{64}(\.json|\.[0-9a-f]{16}\.data)$`)

// requireOnlyHashedBlobs checks that the data directory holds the database,
// the secret key and hash-named blob files only: one metadata and one data
// file per artifact, nothing left in tmp.
func requireOnlyHashedBlobs(t *testing.T, dataDir string, artifactsStored int) {
	t.Helper()
	var metas, datas int
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dataDir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == "secret.key" || strings.HasPrefix(rel, "hopper.db"):
		case blobFile.MatchString(rel):
			if strings.HasSuffix(rel, ".json") {
				metas++
			} else {
				datas++
			}
		default:
			return fmt.Errorf("unexpected file %s in the data directory", rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, artifactsStored, metas, "metadata files")
	require.Equal(t, artifactsStored, datas, "data files")
}

// TestArtifactUploadRules checks the createArtifact rules that concern
// runs: nothing after completion (though a putUrl already handed out
// keeps working, as in Taskcluster), uploads after an exception, and
// unknown or unclaimed runs.
func TestArtifactUploadRules(t *testing.T) {
	t.Parallel()
	srv := blobBackends()[0].start(t)
	// The subtests run in parallel after this function returns, each once
	// it has one of the package's parallel slots, which may be long after:
	// each takes its minute from when it starts.
	hour := tcclient.NewTime(time.Now().Add(time.Hour))
	s3 := func(ct string) *tcclient.CreateArtifactRequest {
		return &tcclient.CreateArtifactRequest{StorageType: tcclient.StorageS3, Expires: hour, ContentType: ct}
	}

	t.Run("after completion", func(t *testing.T) {
		t.Parallel()
		ctx := runContext(t, time.Minute)
		c := claimTask(ctx, t, srv, nil)
		early, err := c.worker.CreateArtifact(ctx, c.taskID, 0, "public/early.log", s3("text/plain"))
		require.NoError(t, err)
		_, err = c.worker.ReportCompleted(ctx, c.taskID, 0)
		require.NoError(t, err)
		for _, name := range []string{"public/late.log", "public/early.log"} {
			_, err = c.worker.CreateArtifact(ctx, c.taskID, 0, name, s3("text/plain"))
			require.Equal(t, http.StatusConflict, tcclient.StatusCode(err), "%s: %v", name, err)
			_, err = c.root.CreateArtifact(ctx, c.taskID, 0, name, &tcclient.CreateArtifactRequest{
				StorageType: tcclient.StorageError, Expires: hour, Reason: tcclient.ArtifactFileMissing, Message: "late"})
			require.Equal(t, http.StatusConflict, tcclient.StatusCode(err), "%s: %v", name, err)
		}
		// The putUrl obtained while running still accepts the bytes.
		up := tcclient.BytesUpload(early.PutURL, "text/plain", "", []byte("early log\n"))
		require.NoError(t, up.Do(ctx))
		_, got := c.download(ctx, t, "public/early.log")
		require.Equal(t, "early log\n", string(got))
		_, err = c.root.GetArtifact(ctx, c.taskID, 0, "public/late.log")
		require.Equal(t, http.StatusNotFound, tcclient.StatusCode(err))
	})

	t.Run("after failure", func(t *testing.T) {
		t.Parallel()
		ctx := runContext(t, time.Minute)
		c := claimTask(ctx, t, srv, nil)
		_, err := c.worker.ReportFailed(ctx, c.taskID, 0)
		require.NoError(t, err)
		_, err = c.worker.CreateArtifact(ctx, c.taskID, 0, "public/late.log", s3("text/plain"))
		require.Equal(t, http.StatusConflict, tcclient.StatusCode(err), "%v", err)
	})

	t.Run("after exception, and unclaimed or unknown runs", func(t *testing.T) {
		t.Parallel()
		ctx := runContext(t, time.Minute)
		retries := 1
		c := claimTask(ctx, t, srv, func(d *tcclient.TaskDefinition) { d.Retries = &retries })
		st, err := c.worker.ReportException(ctx, c.taskID, 0, "worker-shutdown")
		require.NoError(t, err)
		require.Len(t, st.Runs, 2, "worker-shutdown should have added a retry run")
		// Run 0 ended in exception: its worker may still upload logs.
		c.upload(ctx, t, "public/logs/live.log", "text/plain", []byte("after the exception\n"))
		_, got := c.download(ctx, t, "public/logs/live.log")
		require.Equal(t, "after the exception\n", string(got))
		// Run 1 is pending: nobody claimed it, so it has no artifacts.
		_, err = c.root.CreateArtifact(ctx, c.taskID, 1, "public/x", s3("text/plain"))
		var apiErr *tcclient.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		require.Contains(t, apiErr.Message, "Run was not claimed by a worker")
		// Run 2 does not exist; nor does the task of a random id.
		_, err = c.root.CreateArtifact(ctx, c.taskID, 2, "public/x", s3("text/plain"))
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		require.Contains(t, apiErr.Message, "Run not found")
		_, err = c.root.CreateArtifact(ctx, tcclient.NewTaskID(), 0, "public/x", s3("text/plain"))
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		require.Contains(t, apiErr.Message, "Task not found")
		// The claim's credentials are for run 0 only.
		_, err = c.worker.CreateArtifact(ctx, c.taskID, 1, "public/x", s3("text/plain"))
		require.Equal(t, http.StatusForbidden, tcclient.StatusCode(err), "%v", err)
		// Reading an unknown run is a 404.
		_, err = c.root.GetArtifact(ctx, c.taskID, 7, "public/logs/live.log")
		require.Equal(t, http.StatusNotFound, tcclient.StatusCode(err), "%v", err)
	})
}

// TestArtifactExpiration lets artifacts expire on a server that runs its
// expiration every half second, on both backends: an artifact expiring
// before its task, and one expiring with its task, lose their records
// (404) and their stored bytes (the local files are removed; the S3 object
// is deleted, so even a download URL handed out earlier stops working),
// while an artifact not yet expired keeps both.
func TestArtifactExpiration(t *testing.T) {
	t.Parallel()
	for _, b := range blobBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := b.start(t, "--expire-interval", "500ms")
			store := b.storage(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			// A long-lived task with a short-lived artifact and a control.
			long := claimTask(ctx, t, srv, nil)
			// A task that expires at its deadline, a few seconds from now;
			// its artifact expires with it.
			now := time.Now()
			taskExpires := tcclient.NewTime(now.Add(8 * time.Second))
			short := claimTask(ctx, t, srv, func(d *tcclient.TaskDefinition) {
				d.Created = tcclient.NewTime(now)
				d.Deadline = taskExpires
				d.Expires = taskExpires
			})

			type blob struct {
				c       *claimed
				name    string
				expires tcclient.Time
				body    []byte
				getURL  string
				files   []string
			}
			mk := func(c *claimed, name string, exp tcclient.Time) *blob {
				body := make([]byte, 4096)
				_, _ = rand.Read(body)
				res, err := c.worker.CreateArtifact(ctx, c.taskID, 0, name, &tcclient.CreateArtifactRequest{
					StorageType: tcclient.StorageS3, Expires: exp, ContentType: "application/octet-stream"})
				require.NoError(t, err)
				require.NoError(t, tcclient.BytesUpload(res.PutURL, "application/octet-stream", "", body).Do(ctx))
				resp, got := c.download(ctx, t, name)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Equal(t, body, got)
				loc, err := c.root.GetArtifact(ctx, c.taskID, 0, name)
				require.NoError(t, err)
				_, err = store.Stat(ctx, artifacts.BlobKey(c.taskID, 0, name))
				require.NoError(t, err, "blob of %s not stored", name)
				return &blob{c: c, name: name, expires: exp, body: body, getURL: loc.URL}
			}
			early := mk(long, "public/early.bin", tcclient.NewTime(now.Add(4*time.Second)))
			kept := mk(long, "public/kept.bin", tcclient.NewTime(now.Add(time.Hour)))
			withTask := mk(short, "public/with-task.bin", taskExpires)
			// An artifact may not outlive its task.
			_, err := short.worker.CreateArtifact(ctx, short.taskID, 0, "public/too-long.bin", &tcclient.CreateArtifactRequest{
				StorageType: tcclient.StorageS3, Expires: tcclient.NewTime(taskExpires.Add(time.Second)), ContentType: "text/plain"})
			require.Equal(t, http.StatusBadRequest, tcclient.StatusCode(err), "%v", err)

			var before []string
			if b.spec == "" {
				before = blobFiles(t, srv.DataDir)
				require.Len(t, before, 6, "three artifacts, each a data and a metadata file")
			}

			// Wait for the expiration job to delete the short-lived task.
			require.Eventually(t, func() bool {
				_, err := short.root.Status(ctx, short.taskID)
				return tcclient.StatusCode(err) == http.StatusNotFound
			}, 30*time.Second, 100*time.Millisecond, "the expired task was not deleted")
			require.Eventually(t, func() bool {
				_, err := long.root.GetArtifact(ctx, long.taskID, 0, early.name)
				return tcclient.StatusCode(err) == http.StatusNotFound
			}, 30*time.Second, 100*time.Millisecond, "the expired artifact was not deleted")
			require.Greater(t, time.Now(), early.expires.Time)

			for _, gone := range []*blob{early, withTask} {
				_, err := gone.c.root.GetArtifact(ctx, gone.c.taskID, 0, gone.name)
				require.Equal(t, http.StatusNotFound, tcclient.StatusCode(err), "%s: %v", gone.name, err)
				_, err = store.Stat(ctx, artifacts.BlobKey(gone.c.taskID, 0, gone.name))
				require.ErrorIs(t, err, artifacts.ErrNotFound, "blob of %s survived expiration", gone.name)
				// The URL handed out before expiry is still validly signed;
				// it fails because the bytes are gone.
				resp, body := httpDo(ctx, t, http.MethodGet, gone.getURL, "", nil)
				require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", gone.name, body)
			}
			_, err = short.root.ListArtifacts(ctx, short.taskID, 0, tcclient.ListOptions{})
			require.Equal(t, http.StatusNotFound, tcclient.StatusCode(err), "%v", err)
			all, err := long.root.AllArtifacts(ctx, long.taskID, 0)
			require.NoError(t, err)
			require.Len(t, all, 1)
			require.Equal(t, kept.name, all[0].Name)
			resp, got := kept.c.download(ctx, t, kept.name)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, kept.body, got)

			if b.spec == "" {
				// A blob's metadata goes before its data, so the data file
				// of an artifact just reported gone may outlive it by a moment.
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					after := blobFiles(t, srv.DataDir)
					assert.Len(c, after, 2, "only the kept artifact's files remain: %v", after)
				}, 10*time.Second, 50*time.Millisecond)
				removed := 0
				for _, f := range before {
					if _, err := os.Stat(filepath.Join(srv.DataDir, f)); errors.Is(err, fs.ErrNotExist) {
						removed++
					}
				}
				require.Equal(t, 4, removed)
			}
		})
	}
}

// blobFiles lists the files of the local store, relative to dataDir.
func blobFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dataDir, "blobs", "blobs")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dataDir, path)
		if err != nil {
			return err
		}
		out = append(out, rel)
		return nil
	})
	require.NoError(t, err)
	return out
}
