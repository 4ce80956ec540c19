package queueapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// artAuthorizer renders scope-expression templates the way Taskcluster does
// (parameter substitution, for/in/each expansion, AllOf/AnyOf) and holds
// every scope except those in deny. It records the scopes each call
// required, so tests can check what a method asked for.
type artAuthorizer struct {
	mu    sync.Mutex
	deny  map[string]bool
	calls []artAuthCall
}

type artAuthCall struct {
	method string
	scopes []string
}

var artParamRef = regexp.MustCompile(`<([A-Za-z0-9_]+)>`)

func (a *artAuthorizer) Deny(scopes ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.deny == nil {
		a.deny = map[string]bool{}
	}
	for _, s := range scopes {
		a.deny[s] = true
	}
}

// Calls returns the scopes required by each authorization of method.
func (a *artAuthorizer) Calls(method string) [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [][]string
	for _, c := range a.calls {
		if c.method == method {
			out = append(out, c.scopes)
		}
	}
	return out
}

func (a *artAuthorizer) Authorize(c *api.Call, template string, params map[string]any) error {
	// The production renderer must accept the template and parameters too.
	tmpl, err := auth.ParseTemplate([]byte(template))
	if err != nil {
		return fmt.Errorf("parsing scope template %s: %w", template, err)
	}
	if _, _, err := tmpl.Render(params); err != nil {
		return fmt.Errorf("rendering scope template %s with %v: %w", template, params, err)
	}
	var expr any
	if err := json.Unmarshal([]byte(template), &expr); err != nil {
		return fmt.Errorf("parsing scope template %s: %w", template, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var leaves []string
	ok, err := a.satisfied(expr, params, &leaves)
	if err != nil {
		return err
	}
	a.calls = append(a.calls, artAuthCall{method: c.Route.Name, scopes: leaves})
	if !ok {
		return api.Errorf(api.CodeInsufficientScopes, "Client lacks scopes for %s", template)
	}
	return nil
}

func (a *artAuthorizer) satisfied(expr any, params map[string]any, leaves *[]string) (bool, error) {
	switch e := expr.(type) {
	case string:
		var missing error
		s := artParamRef.ReplaceAllStringFunc(e, func(ref string) string {
			v, ok := params[ref[1:len(ref)-1]]
			if !ok {
				missing = fmt.Errorf("scope template %q needs parameter %s", e, ref)
			}
			return fmt.Sprint(v)
		})
		if missing != nil {
			return false, missing
		}
		*leaves = append(*leaves, s)
		return !a.deny[s], nil
	case map[string]any:
		for kind, members := range e {
			list, ok := members.([]any)
			if !ok || (kind != "AllOf" && kind != "AnyOf") {
				return false, fmt.Errorf("unexpected scope expression %v", e)
			}
			var expanded []any
			for _, m := range list {
				more, err := artExpandForEach(m, params)
				if err != nil {
					return false, err
				}
				expanded = append(expanded, more...)
			}
			allOK, anyOK := true, false
			for _, m := range expanded {
				ok, err := a.satisfied(m, params, leaves)
				if err != nil {
					return false, err
				}
				allOK, anyOK = allOK && ok, anyOK || ok
			}
			if kind == "AllOf" {
				return allOK, nil
			}
			return anyOK, nil
		}
	}
	return false, fmt.Errorf("unexpected scope expression %v", expr)
}

// artExpandForEach turns {"for","in","each"} into one scope per list element.
func artExpandForEach(m any, params map[string]any) ([]any, error) {
	obj, ok := m.(map[string]any)
	if !ok || obj["for"] == nil {
		return []any{m}, nil
	}
	variable, in, each := obj["for"].(string), obj["in"].(string), obj["each"].(string)
	var items []string
	switch v := params[in].(type) {
	case []string:
		items = v
	case []any:
		for _, x := range v {
			items = append(items, fmt.Sprint(x))
		}
	default:
		return nil, fmt.Errorf("scope template loops over %s, which is %T", in, params[in])
	}
	out := make([]any, 0, len(items))
	for _, item := range items {
		out = append(out, strings.ReplaceAll(each, "<"+variable+">", item))
	}
	return out, nil
}

// artIssuer mints recognisable fake temporary credentials.
type artIssuer struct{}

func (artIssuer) TaskCredentials(taskID string, runID int, _, _ string, _, _ time.Time, _ []string) (Credentials, error) {
	return Credentials{ClientID: fmt.Sprintf("task-client/%s/%d", taskID, runID), AccessToken: "not-a-secret", Certificate: "{}"}, nil
}

// artPublisher records artifact-created announcements.
type artPublisher struct {
	mu      sync.Mutex
	created []string // "<taskId>/<runId>/<name>:<storageType>"
}

func (p *artPublisher) PublishChanges(context.Context, []store.Change) {}

func (p *artPublisher) PublishArtifactCreated(t *queue.TaskState, runID int, a *store.Artifact) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.created = append(p.created, fmt.Sprintf("%s/%d/%s:%s", t.TaskID, runID, a.Name, a.StorageType))
}

func (p *artPublisher) Created() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.created...)
}

// artHarness is a queue served over HTTP with a SQLite store and a local
// blob backend mounted on the same server.
type artHarness struct {
	t      *testing.T
	base   string
	clock  *testclock.Clock // shared by the API server and the blob backend, so tests can expire artifacts and upload windows without waiting
	authz  *artAuthorizer
	pub    *artPublisher
	client *http.Client
}

const artTaskQueue = "art-prov/art-worker"

func newArtHarness(t *testing.T) *artHarness {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "queue.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	clock := testclock.New(time.Now().UTC().Truncate(time.Millisecond))
	ts := httptest.NewUnstartedServer(nil)
	base := "http://" + ts.Listener.Addr().String()
	blobs, err := artifacts.NewLocal(artifacts.LocalOptions{
		Dir: t.TempDir(), BaseURL: base, SigningKey: bytes.Repeat([]byte("k"), artifacts.MinSigningKeyLen), NowFunc: clock.Now,
	})
	require.NoError(t, err)
	h := &artHarness{t: t, base: base, clock: clock, authz: &artAuthorizer{}, pub: &artPublisher{},
		// Redirects are inspected, not followed; compression is off so the
		// stored Content-Encoding and bytes are seen as sent.
		client: &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport:     &http.Transport{DisableCompression: true},
		},
	}
	srv, err := New(Options{
		Config: Config{RootURL: base, LongPoll: 2 * time.Second}, Store: db, Clock: clock,
		Issuer: artIssuer{}, Publisher: h.pub, Artifacts: blobs,
	})
	require.NoError(t, err)
	httpSrv, err := api.New(api.Options{Clock: clock, Authorizer: h.authz, Routes: Routes(Deps{Server: srv}),
		Handlers: map[string]http.Handler{blobs.MountPath(): blobs}})
	require.NoError(t, err)
	ts.Config.Handler = httpSrv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(h.client.CloseIdleConnections)
	return h
}

// artSlug returns a random "nice" slugid.
func artSlug() string {
	u := uuid.New()
	u[0] &= 0x7f
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// do sends a request to the queue (path relative to the API base unless it
// is absolute) and returns the response with its body read.
func (h *artHarness) do(method, path string, body any) artReply {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(h.t, err)
		rd = bytes.NewReader(b)
	}
	target := path
	if !strings.HasPrefix(path, "http") {
		target = h.base + "/api/queue/v1" + path
	}
	req, err := http.NewRequest(method, target, rd)
	require.NoError(h.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return artReply{resp, out}
}

// artReply is a response with its body read.
type artReply struct {
	resp *http.Response
	body []byte
}

// ok requires a given status and decodes the JSON body.
func (h *artHarness) ok(status int, r artReply) map[string]any {
	h.t.Helper()
	require.Equal(h.t, status, r.resp.StatusCode, "body: %s", r.body)
	var out map[string]any
	require.NoError(h.t, json.Unmarshal(r.body, &out), "body: %s", r.body)
	return out
}

// requireAPIError checks Taskcluster's error format.
func (h *artHarness) requireAPIError(r artReply, status int, code, messagePrefix string) {
	h.t.Helper()
	out := h.ok(status, r)
	require.Equal(h.t, code, out["code"], "body: %s", r.body)
	require.True(h.t, strings.HasPrefix(out["message"].(string), messagePrefix), "message %q does not start with %q", out["message"], messagePrefix)
}

func (h *artHarness) ts(d time.Duration) string {
	return queue.NewTime(h.clock.Now().Add(d)).String()
}

// createTask defines a task in artTaskQueue, optionally depending on
// others, and returns its id.
func (h *artHarness) createTask(deps ...string) string {
	h.t.Helper()
	id := artSlug()
	body := map[string]any{
		"taskQueueId": artTaskQueue, "created": h.ts(0), "deadline": h.ts(time.Hour), "expires": h.ts(48 * time.Hour),
		"payload": map[string]any{}, "metadata": map[string]any{"name": "t", "description": "d", "owner": "o@example.com", "source": "https://example.com/src"},
	}
	if len(deps) > 0 {
		body["dependencies"] = deps
	}
	h.ok(http.StatusOK, h.do(http.MethodPut, "/task/"+id, body))
	return id
}

// claimed creates a task and claims its run 0.
func (h *artHarness) claimed() string {
	h.t.Helper()
	id := h.createTask()
	out := h.ok(http.StatusOK, h.do(http.MethodPost, "/claim-work/"+url.PathEscape(artTaskQueue),
		map[string]any{"workerGroup": "wg", "workerId": "wi", "tasks": 1}))
	tasks := out["tasks"].([]any)
	require.Len(h.t, tasks, 1)
	require.Equal(h.t, id, tasks[0].(map[string]any)["status"].(map[string]any)["taskId"])
	return id
}

func artPath(taskID string, runID int, kind, name string) string {
	return fmt.Sprintf("/task/%s/runs/%d/%s/%s", taskID, runID, kind, url.PathEscape(name))
}

func artLatestPath(taskID, kind, name string) string {
	return fmt.Sprintf("/task/%s/%s/%s", taskID, kind, url.PathEscape(name))
}

func (h *artHarness) create(taskID string, runID int, name string, body map[string]any) artReply {
	h.t.Helper()
	return h.do(http.MethodPost, artPath(taskID, runID, "artifacts", name), body)
}

func (h *artHarness) s3Body(contentType string, expires time.Duration) map[string]any {
	return map[string]any{"storageType": "s3", "contentType": contentType, "expires": h.ts(expires)}
}

func (h *artHarness) refBody(u string) map[string]any {
	return map[string]any{"storageType": "reference", "contentType": "text/html", "url": u, "expires": h.ts(24 * time.Hour)}
}

func (h *artHarness) linkBody(target string) map[string]any {
	return map[string]any{"storageType": "link", "artifact": target, "expires": h.ts(24 * time.Hour)}
}

func (h *artHarness) errorBody(reason, message string) map[string]any {
	return map[string]any{"storageType": "error", "reason": reason, "message": message, "expires": h.ts(24 * time.Hour)}
}

// upload PUTs data to a putUrl as an uploader would.
func (h *artHarness) upload(putURL, contentType, contentEncoding string, data []byte) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPut, putURL, bytes.NewReader(data))
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", contentType)
	if contentEncoding != "" {
		req.Header.Set("Content-Encoding", contentEncoding)
	}
	resp, err := h.client.Do(req)
	require.NoError(h.t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "upload: %s", body)
}

func TestArtifactS3RoundTrip(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()
	const name, ct = "public/logs/live.log", "text/plain; charset=utf-8"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("hello from the worker\n"))
	require.NoError(t, zw.Close())
	data := gz.Bytes()

	body := h.s3Body(ct, 24*time.Hour)
	body["contentLength"] = len(data)
	created := h.ok(http.StatusOK, h.create(taskID, 0, name, body))
	require.Equal(t, "s3", created["storageType"])
	require.Equal(t, ct, created["contentType"])
	require.Equal(t, h.ts(45*time.Minute), created["expires"], "expires is the putUrl expiry, not the artifact's")
	require.Len(t, created, 4)
	h.upload(created["putUrl"].(string), ct, "gzip", data)

	for _, p := range []string{
		artPath(taskID, 0, "artifacts", name),                                 // %2F-escaped, as the official clients send it
		fmt.Sprintf("/task/%s/runs/0/artifacts/public/logs/live.log", taskID), // raw slashes
		artLatestPath(taskID, "artifacts", name),
		fmt.Sprintf("/task/%s/artifacts/public/logs/live.log", taskID),
	} {
		r := h.do(http.MethodGet, p, nil)
		got := h.ok(http.StatusSeeOther, r)
		require.Equal(t, "s3", r.resp.Header.Get("x-taskcluster-artifact-storage-type"))
		loc := r.resp.Header.Get("Location")
		require.NotEmpty(t, loc)
		require.Equal(t, map[string]any{"storageType": "s3", "url": loc}, got)
		require.True(t, strings.HasPrefix(r.resp.Header.Get("Content-Type"), "application/json"))

		dl, err := h.client.Get(loc)
		require.NoError(t, err)
		b, err := io.ReadAll(dl.Body)
		dl.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, dl.StatusCode)
		require.Equal(t, data, b)
		require.Equal(t, ct, dl.Header.Get("Content-Type"))
		require.Equal(t, "gzip", dl.Header.Get("Content-Encoding"))
		require.Equal(t, fmt.Sprint(len(data)), dl.Header.Get("Content-Length"))
	}

	// A link serves its target's bytes.
	h.ok(http.StatusOK, h.create(taskID, 0, "public/latest.log", h.linkBody(name)))
	r := h.do(http.MethodGet, artLatestPath(taskID, "artifacts", "public/latest.log"), nil)
	loc := h.ok(http.StatusSeeOther, r)["url"].(string)
	require.Equal(t, "s3", r.resp.Header.Get("x-taskcluster-artifact-storage-type"))
	dl, err := h.client.Get(loc)
	require.NoError(t, err)
	b, err := io.ReadAll(dl.Body)
	dl.Body.Close()
	require.NoError(t, err)
	require.Equal(t, data, b)

	content := h.ok(http.StatusOK, h.do(http.MethodGet, artPath(taskID, 0, "artifact-content", name), nil))
	require.Equal(t, "s3", content["storageType"])
	require.Contains(t, content["url"], h.base+artifacts.DefaultMountPath)

	want := map[string]any{"storageType": "s3", "name": name, "expires": h.ts(24 * time.Hour), "contentType": ct, "contentLength": float64(len(data))}
	require.Equal(t, want, h.ok(http.StatusOK, h.do(http.MethodGet, artPath(taskID, 0, "artifact-info", name), nil)))
	require.Equal(t, want, h.ok(http.StatusOK, h.do(http.MethodGet, artLatestPath(taskID, "artifact-info", name), nil)))
	list := h.ok(http.StatusOK, h.do(http.MethodGet, fmt.Sprintf("/task/%s/runs/0/artifacts", taskID), nil))
	require.Len(t, list["artifacts"], 2)
	require.Equal(t, want, list["artifacts"].([]any)[1], "ordered by name")
	require.NotContains(t, list, "continuationToken")

	require.Equal(t, []string{taskID + "/0/public/latest.log:link"}, h.pub.Created(), "s3 artifacts are never announced")
}

// TestArtifactNames checks that names with slashes, dots, spaces and
// percent signs survive the URL both ways, as one blob each.
func TestArtifactNames(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()
	tests := []struct {
		name string
		// forms lists the name as sent in URLs; empty means only the
		// encodeURIComponent form (slashes as %2F).
		forms []string
	}{
		{"public/build/target.tar.gz", []string{"public%2Fbuild%2Ftarget.tar.gz", "public/build/target.tar.gz", "public/build%2Ftarget.tar.gz"}},
		{"public/with space.txt", []string{"public%2Fwith%20space.txt", "public/with%20space.txt"}},
		{"public/100%.txt", []string{"public%2F100%25.txt", "public/100%25.txt"}},
		{"public/a%2Fb", []string{"public%2Fa%252Fb", "public/a%252Fb"}},
		// A raw ".." segment would be cleaned away by any HTTP stack, so
		// such names only work escaped.
		{"public/../escape", []string{"public%2F..%2Fescape", "public/%2E%2E/escape"}},
		{"..", []string{"%2E%2E"}},
		{"public/..hidden/x", []string{"public%2F..hidden%2Fx", "public/..hidden/x"}},
		{"private/dir/", []string{"private%2Fdir%2F", "private/dir/"}},
		{"~!$&'()*+,;=:@[]{}", nil},
	}
	for i, tt := range tests {
		data := []byte(fmt.Sprintf("artifact %d: %s", i, tt.name))
		first := artPath(taskID, 0, "artifacts", tt.name)
		if len(tt.forms) > 0 {
			first = fmt.Sprintf("/task/%s/runs/0/artifacts/%s", taskID, tt.forms[0])
		}
		created := h.ok(http.StatusOK, h.do(http.MethodPost, first, h.s3Body("application/octet-stream", time.Hour)))
		h.upload(created["putUrl"].(string), "application/octet-stream", "", data)
		paths := []string{first}
		for _, f := range tt.forms[min(1, len(tt.forms)):] {
			paths = append(paths, fmt.Sprintf("/task/%s/runs/0/artifacts/%s", taskID, f))
		}
		for _, p := range paths {
			r := h.do(http.MethodGet, p, nil)
			loc := h.ok(http.StatusSeeOther, r)["url"].(string)
			dl, err := h.client.Get(loc)
			require.NoError(t, err)
			b, _ := io.ReadAll(dl.Body)
			dl.Body.Close()
			require.Equal(t, string(data), string(b), "name %q via %s", tt.name, p)
		}
		info := h.ok(http.StatusOK, h.do(http.MethodGet, strings.Replace(first, "/artifacts/", "/artifact-info/", 1), nil))
		require.Equal(t, tt.name, info["name"])
	}
	list := h.ok(http.StatusOK, h.do(http.MethodGet, fmt.Sprintf("/task/%s/runs/0/artifacts", taskID), nil))
	require.Len(t, list["artifacts"], len(tests))

	// Names must be printable ASCII.
	for _, bad := range []string{"tab%09name", "caf%C3%A9", "nul%00"} {
		r := h.do(http.MethodPost, fmt.Sprintf("/task/%s/runs/0/artifacts/%s", taskID, bad), h.s3Body("text/plain", time.Hour))
		h.requireAPIError(r, http.StatusBadRequest, api.CodeInvalidRequestArguments, "Invalid URL patterns:\nURL parameter 'name' given as")
	}
	long := strings.Repeat("n", maxArtifactNameLen+1)
	r := h.create(taskID, 0, long, h.s3Body("text/plain", time.Hour))
	h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Artifact name is 1025 characters long")
}

func TestArtifactReferenceLinkError(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()
	const target = "https://example.com/some/report.html?x=1"
	require.Equal(t, map[string]any{"storageType": "reference"}, h.ok(http.StatusOK, h.create(taskID, 0, "public/ref", h.refBody(target))))
	require.Equal(t, map[string]any{"storageType": "link"}, h.ok(http.StatusOK, h.create(taskID, 0, "public/link2", h.linkBody("public/ref"))))
	require.Equal(t, map[string]any{"storageType": "link"}, h.ok(http.StatusOK, h.create(taskID, 0, "public/link1", h.linkBody("public/link2"))))
	require.Equal(t, map[string]any{"storageType": "error"},
		h.ok(http.StatusOK, h.create(taskID, 0, "public/err", h.errorBody("file-missing-on-worker", "no such file: /out/x"))))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/cycle-a", h.linkBody("public/cycle-b")))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/cycle-b", h.linkBody("public/cycle-a")))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/self", h.linkBody("public/self")))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/dangling", h.linkBody("public/nothing-here")))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/to-error", h.linkBody("public/err")))

	t.Run("reference", func(t *testing.T) {
		r := h.do(http.MethodGet, artPath(taskID, 0, "artifacts", "public/ref"), nil)
		require.Equal(t, map[string]any{"storageType": "reference", "url": target}, h.ok(http.StatusSeeOther, r))
		require.Equal(t, target, r.resp.Header.Get("Location"))
		require.Equal(t, "reference", r.resp.Header.Get("x-taskcluster-artifact-storage-type"))
	})
	t.Run("link chain", func(t *testing.T) {
		r := h.do(http.MethodGet, artLatestPath(taskID, "artifacts", "public/link1"), nil)
		require.Equal(t, map[string]any{"storageType": "reference", "url": target}, h.ok(http.StatusSeeOther, r))
		require.Equal(t, "reference", r.resp.Header.Get("x-taskcluster-artifact-storage-type"))
		calls := h.authz.Calls("getLatestArtifact")
		require.Equal(t, []string{"queue:get-artifact:public/link1", "queue:get-artifact:public/link2", "queue:get-artifact:public/ref"},
			calls[len(calls)-1], "every hop needs its scope")
		content := h.ok(http.StatusOK, h.do(http.MethodGet, artPath(taskID, 0, "artifact-content", "public/link1"), nil))
		require.Equal(t, map[string]any{"storageType": "reference", "url": target}, content)
		// artifact-info does not follow links.
		info := h.ok(http.StatusOK, h.do(http.MethodGet, artPath(taskID, 0, "artifact-info", "public/link1"), nil))
		require.Equal(t, "link", info["storageType"])
		require.Equal(t, "application/binary", info["contentType"])
	})
	t.Run("cycles", func(t *testing.T) {
		for _, name := range []string{"public/cycle-a", "public/cycle-b", "public/self"} {
			r := h.do(http.MethodGet, artPath(taskID, 0, "artifacts", name), nil)
			h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Artifact leads to a link cycle")
			r = h.do(http.MethodGet, artLatestPath(taskID, "artifact-content", name), nil)
			h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Artifact leads to a link cycle")
		}
	})
	t.Run("missing", func(t *testing.T) {
		for _, p := range []string{
			artPath(taskID, 0, "artifacts", "public/dangling"),
			artPath(taskID, 0, "artifacts", "public/never-created"),
			artPath(taskID, 7, "artifacts", "public/ref"),
			artPath(artSlug(), 0, "artifacts", "public/ref"),
			artPath(taskID, 0, "artifact-info", "public/never-created"),
			artPath(taskID, 0, "artifact-content", "public/dangling"),
		} {
			r := h.do(http.MethodGet, p, nil)
			h.requireAPIError(r, http.StatusNotFound, api.CodeResourceNotFound, "Artifact not found")
		}
		r := h.do(http.MethodGet, artLatestPath(artSlug(), "artifacts", "public/ref"), nil)
		h.requireAPIError(r, http.StatusNotFound, api.CodeResourceNotFound, "Task not found")
	})
	t.Run("error artifacts", func(t *testing.T) {
		for _, name := range []string{"public/err", "public/to-error"} {
			r := h.do(http.MethodGet, artPath(taskID, 0, "artifacts", name), nil)
			require.Equal(t, http.StatusFailedDependency, r.resp.StatusCode)
			require.JSONEq(t, `{"reason":"file-missing-on-worker","message":"no such file: /out/x"}`, string(r.body))
			require.Equal(t, "error", r.resp.Header.Get("x-taskcluster-artifact-storage-type"))
			content := h.ok(http.StatusOK, h.do(http.MethodGet, artLatestPath(taskID, "artifact-content", name), nil))
			require.Equal(t, map[string]any{"storageType": "error", "reason": "file-missing-on-worker", "message": "no such file: /out/x"}, content)
		}
	})
	t.Run("announcements", func(t *testing.T) {
		created := h.pub.Created()
		for _, want := range []string{"public/ref:reference", "public/link1:link", "public/err:error", "public/cycle-a:link"} {
			require.Contains(t, created, taskID+"/0/"+want)
		}
	})
}

func TestArtifactExpiry(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()

	r := h.create(taskID, 0, "public/old", h.s3Body("text/plain", -16*time.Minute))
	h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Expires must be in the future")
	r = h.create(taskID, 0, "public/too-late", h.s3Body("text/plain", 49*time.Hour))
	h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Artifact expires ("+h.ts(49*time.Hour)+") after the task expiration "+h.ts(48*time.Hour))

	// Slightly in the past is tolerated (clock skew), and is then expired.
	h.ok(http.StatusOK, h.create(taskID, 0, "public/skewed", h.s3Body("text/plain", -time.Minute)))
	r = h.do(http.MethodGet, artPath(taskID, 0, "artifacts", "public/skewed"), nil)
	h.requireAPIError(r, http.StatusGone, api.CodeResourceExpired, "Artifact expired")

	ref := h.refBody("https://example.com/x")
	ref["expires"] = h.ts(time.Hour)
	h.ok(http.StatusOK, h.create(taskID, 0, "public/ref", ref))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/link", h.linkBody("public/ref")))
	h.ok(http.StatusSeeOther, h.do(http.MethodGet, artPath(taskID, 0, "artifacts", "public/link"), nil))

	h.clock.Advance(2 * time.Hour)
	for _, p := range []string{
		artPath(taskID, 0, "artifacts", "public/ref"),
		artPath(taskID, 0, "artifacts", "public/link"), // the link lives on, its target does not
		artLatestPath(taskID, "artifact-content", "public/ref"),
	} {
		r := h.do(http.MethodGet, p, nil)
		h.requireAPIError(r, http.StatusGone, api.CodeResourceExpired, "Artifact expired")
	}
	// Records of expired artifacts stay visible until they are deleted.
	info := h.ok(http.StatusOK, h.do(http.MethodGet, artPath(taskID, 0, "artifact-info", "public/ref"), nil))
	require.Equal(t, "reference", info["storageType"])
	list := h.ok(http.StatusOK, h.do(http.MethodGet, fmt.Sprintf("/task/%s/artifacts", taskID), nil))
	require.Len(t, list["artifacts"], 3)
}

// TestArtifactRecreation walks the re-creation rules: each case creates
// first, then second, on a fresh name.
func TestArtifactRecreation(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()
	s3 := func(ct string, exp time.Duration) map[string]any { return h.s3Body(ct, exp) }
	withExpiry := func(b map[string]any, exp time.Duration) map[string]any {
		b["expires"] = h.ts(exp)
		return b
	}
	withContentType := func(b map[string]any, ct string) map[string]any {
		b["contentType"] = ct
		return b
	}
	tests := []struct {
		name          string
		first, second map[string]any
		wantOK        bool
		wantInfo      map[string]any // checked after an accepted second call
	}{
		{"identical s3", s3("text/plain", 2*time.Hour), s3("text/plain", 2*time.Hour), true, nil},
		{"s3 extends expiry", s3("text/plain", 2*time.Hour), s3("text/plain", 3*time.Hour), true,
			map[string]any{"storageType": "s3", "expires": h.ts(3 * time.Hour), "contentType": "text/plain"}},
		{"s3 shortens expiry", s3("text/plain", 2*time.Hour), s3("text/plain", time.Hour), false, nil},
		{"s3 new content type", s3("text/plain", 2*time.Hour), s3("text/html", 2*time.Hour), false, nil},
		{"s3 to reference", s3("text/html", 24*time.Hour), h.refBody("https://example.com"), false, nil},
		{"reference url changes", h.refBody("https://example.com/a"), h.refBody("https://example.com/b"), true,
			map[string]any{"storageType": "reference", "contentType": "text/html"}},
		{"reference content type changes", h.refBody("https://example.com/a"),
			withContentType(h.refBody("https://example.com/a"), "text/plain"), false, nil},
		{"reference to link keeps content type", h.refBody("https://example.com/a"), h.linkBody("other"), true,
			map[string]any{"storageType": "link", "contentType": "text/html"}},
		{"link to reference", h.linkBody("other"), h.refBody("https://example.com/a"), false, nil},
		{"same link", h.linkBody("other"), h.linkBody("other"), true, nil},
		{"link to another target", h.linkBody("other"), h.linkBody("else"), false, nil},
		{"link with shorter expiry", h.linkBody("other"), withExpiry(h.linkBody("other"), time.Hour), false, nil},
		{"same error", h.errorBody("file-missing-on-worker", "m"), h.errorBody("file-missing-on-worker", "m"), true, nil},
		{"error with another message", h.errorBody("file-missing-on-worker", "m"), h.errorBody("file-missing-on-worker", "n"), false, nil},
		{"error with another reason", h.errorBody("file-missing-on-worker", "m"), h.errorBody("too-large-file-on-worker", "m"), false, nil},
		{"error to s3", h.errorBody("file-missing-on-worker", "m"), s3("application/binary", 24*time.Hour), false, nil},
	}
	for _, tt := range tests {
		name := strings.ReplaceAll(tt.name, " ", "-")
		first := h.ok(http.StatusOK, h.create(taskID, 0, name, tt.first))
		r := h.create(taskID, 0, name, tt.second)
		if !tt.wantOK {
			h.requireAPIError(r, http.StatusConflict, api.CodeRequestConflict,
				"Artifact already exists with different properties, and none of the allowed exceptions apply: ")
			continue
		}
		second := h.ok(http.StatusOK, r)
		if first["storageType"] == "s3" {
			require.Equal(t, first["putUrl"], second["putUrl"], tt.name)
		}
		if tt.wantInfo != nil {
			info := h.ok(http.StatusOK, h.do(http.MethodGet, artPath(taskID, 0, "artifact-info", name), nil))
			for k, v := range tt.wantInfo {
				require.Equal(t, v, info[k], "%s: %s", tt.name, k)
			}
		}
	}

	// A repeat later hands out a fresh putUrl (how uploaders refresh one).
	first := h.ok(http.StatusOK, h.create(taskID, 0, "refresh", s3("text/plain", 2*time.Hour)))
	h.clock.Advance(time.Minute)
	second := h.ok(http.StatusOK, h.create(taskID, 0, "refresh", s3("text/plain", 2*time.Hour)))
	require.NotEqual(t, first["putUrl"], second["putUrl"])
	require.Equal(t, h.ts(45*time.Minute), second["expires"])

	// Accepted re-creations are announced again (except s3).
	announced := 0
	for _, c := range h.pub.Created() {
		if strings.HasPrefix(c, taskID+"/0/same-link:") {
			announced++
		}
	}
	require.Equal(t, 2, announced)

	// The changed url is what readers get.
	r := h.do(http.MethodGet, artPath(taskID, 0, "artifacts", "reference-url-changes"), nil)
	require.Equal(t, "https://example.com/b", h.ok(http.StatusSeeOther, r)["url"])
}

func TestArtifactUploadWindow(t *testing.T) {
	t.Parallel()

	t.Run("unknown task, run, unclaimed run", func(t *testing.T) {
		t.Parallel()
		h := newArtHarness(t)
		r := h.create(artSlug(), 0, "public/x", h.s3Body("text/plain", time.Hour))
		h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Task not found")

		taskID := h.claimed()
		pending := h.createTask()
		r = h.create(pending, 0, "public/x", h.s3Body("text/plain", time.Hour))
		h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Run was not claimed by a worker and so no artifacts can exist")

		r = h.do(http.MethodPost, fmt.Sprintf("/task/%s/runs/1/artifacts/public%%2Fx", taskID), h.s3Body("text/plain", time.Hour))
		h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Run not found")
		// Beyond the schemas' runId range, the URL itself is refused.
		r = h.do(http.MethodPost, fmt.Sprintf("/task/%s/runs/99999999999999999999999/artifacts/public%%2Fx", taskID), h.s3Body("text/plain", time.Hour))
		h.requireAPIError(r, http.StatusBadRequest, api.CodeInvalidRequestArguments, "Invalid URL patterns:\nURL parameter 'runId' given as '99999999999999999999999' must be an integer from 0 to 1000")
	})

	t.Run("completed run is frozen", func(t *testing.T) {
		t.Parallel()
		h := newArtHarness(t)
		taskID := h.claimed()
		h.ok(http.StatusOK, h.create(taskID, 0, "public/before", h.refBody("https://example.com")))
		h.ok(http.StatusOK, h.do(http.MethodPost, fmt.Sprintf("/task/%s/runs/0/completed", taskID), nil))
		r := h.create(taskID, 0, "public/after", h.refBody("https://example.com"))
		h.requireAPIError(r, http.StatusConflict, api.CodeRequestConflict,
			"Artifacts cannot be created for a task after it is resolved, unless it is resolved 'exception', and even in this case only up to 25 min past resolution.This to ensure")
		require.Contains(t, h.ok(http.StatusConflict, r)["message"], "Task status: {\n  \"taskId\": \""+taskID+"\"")
		// Even an identical repeat is refused once the run is resolved.
		r = h.create(taskID, 0, "public/before", h.refBody("https://example.com"))
		h.requireAPIError(r, http.StatusConflict, api.CodeRequestConflict, "Artifacts cannot be created")
	})

	t.Run("exception allows 25 minutes", func(t *testing.T) {
		t.Parallel()
		h := newArtHarness(t)
		taskID := h.claimed()
		h.ok(http.StatusOK, h.do(http.MethodPost, fmt.Sprintf("/task/%s/runs/0/exception", taskID), map[string]any{"reason": "worker-shutdown"}))
		h.clock.Advance(24 * time.Minute)
		h.ok(http.StatusOK, h.create(taskID, 0, "public/logs/live.log", h.s3Body("text/plain", time.Hour)))
		// The retry's run 1 is pending, not claimed.
		r := h.create(taskID, 1, "public/x", h.s3Body("text/plain", time.Hour))
		h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Run was not claimed")
		h.clock.Advance(time.Minute)
		r = h.create(taskID, 0, "public/logs/live.log", h.s3Body("text/plain", time.Hour))
		h.requireAPIError(r, http.StatusConflict, api.CodeRequestConflict, "Artifacts cannot be created")
	})
}

func TestArtifactListing(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()
	names := []string{"e", "a/b", "c", "a", "d d"}
	for _, n := range names {
		h.ok(http.StatusOK, h.create(taskID, 0, n, h.refBody("https://example.com/"+url.PathEscape(n))))
	}
	var got []string
	token := ""
	pages := 0
	for {
		q := url.Values{"limit": {"2"}}
		if token != "" {
			q.Set("continuationToken", token)
		}
		page := h.ok(http.StatusOK, h.do(http.MethodGet, fmt.Sprintf("/task/%s/runs/0/artifacts?%s", taskID, q.Encode()), nil))
		pages++
		for _, a := range page["artifacts"].([]any) {
			got = append(got, a.(map[string]any)["name"].(string))
		}
		next, ok := page["continuationToken"].(string)
		if !ok {
			break
		}
		token = next
	}
	require.Equal(t, []string{"a", "a/b", "c", "d d", "e"}, got)
	require.Equal(t, 3, pages)
	latest := h.ok(http.StatusOK, h.do(http.MethodGet, fmt.Sprintf("/task/%s/artifacts", taskID), nil))
	require.Len(t, latest["artifacts"], len(names))

	unscheduled := h.createTask(taskID)
	tests := []struct {
		path    string
		status  int
		code    string
		message string
	}{
		{fmt.Sprintf("/task/%s/runs/1/artifacts", taskID), http.StatusNotFound, api.CodeResourceNotFound,
			fmt.Sprintf("Task with taskId: `%s` has no run with runId: 1", taskID)},
		{fmt.Sprintf("/task/%s/runs/0/artifacts", artSlug()), http.StatusNotFound, api.CodeResourceNotFound, "Task not found"},
		{fmt.Sprintf("/task/%s/artifacts", artSlug()), http.StatusNotFound, api.CodeResourceNotFound, "Task not found"},
		{fmt.Sprintf("/task/%s/artifacts", unscheduled), http.StatusNotFound, api.CodeResourceNotFound, "Task doesn't have any runs"},
		{fmt.Sprintf("/task/%s/runs/0/artifacts", unscheduled), http.StatusNotFound, api.CodeResourceNotFound, "Task doesn't have any runs"},
		{artLatestPath(unscheduled, "artifact-info", "a"), http.StatusNotFound, api.CodeResourceNotFound, "Task doesn't have any runs"},
		{artLatestPath(unscheduled, "artifacts", "a"), http.StatusNotFound, api.CodeResourceNotFound, "Task doesn't have any runs"},
		{fmt.Sprintf("/task/%s/runs/0/artifacts?continuationToken=%%21%%21", taskID), http.StatusBadRequest, api.CodeInputError, "Invalid continuationToken"},
		{fmt.Sprintf("/task/%s/runs/0/artifacts?limit=x", taskID), http.StatusBadRequest, api.CodeInvalidRequestArguments, `Query-string parameter: limit="x" does not match expression: /^[0-9]+$/`},
		{fmt.Sprintf("/task/%s/runs/0/artifacts?foo=1", taskID), http.StatusBadRequest, api.CodeInvalidRequestArguments, "Query-string parameter: foo is not supported!"},
	}
	for _, tt := range tests {
		r := h.do(http.MethodGet, tt.path, nil)
		h.requireAPIError(r, tt.status, tt.code, tt.message)
	}
}

func TestArtifactUnsupportedAndFinish(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()
	r := h.create(taskID, 0, "public/obj", map[string]any{"storageType": "object", "contentType": "text/plain", "expires": h.ts(time.Hour)})
	h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Storage type `object` is not supported")
	require.Contains(t, h.ok(http.StatusBadRequest, r)["message"], "s3, reference, link, error")

	r = h.create(taskID, 0, "public/bad", map[string]any{"storageType": "azure", "expires": h.ts(time.Hour)})
	h.requireAPIError(r, http.StatusBadRequest, api.CodeInputValidationError, "")

	uploadID := map[string]any{"uploadId": artSlug()}
	r = h.do(http.MethodPut, artPath(taskID, 0, "artifacts", "public/nothing"), uploadID)
	h.requireAPIError(r, http.StatusNotFound, api.CodeResourceNotFound,
		fmt.Sprintf("Artifact with taskId `%s`, runId 0, name `public/nothing` not found", taskID))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/s3", h.s3Body("text/plain", time.Hour)))
	r = h.do(http.MethodPut, artPath(taskID, 0, "artifacts", "public/s3"), uploadID)
	h.requireAPIError(r, http.StatusBadRequest, api.CodeInputError, "Only object artifacts can be finished")
	r = h.do(http.MethodPut, artPath(taskID, 0, "artifacts", "public/s3"), map[string]any{})
	h.requireAPIError(r, http.StatusBadRequest, api.CodeInputValidationError, "")
}

func TestArtifactScopes(t *testing.T) {
	t.Parallel()
	h := newArtHarness(t)
	taskID := h.claimed()
	h.ok(http.StatusOK, h.create(taskID, 0, "private/target", h.refBody("https://example.com")))
	h.ok(http.StatusOK, h.create(taskID, 0, "public/alias", h.linkBody("private/target")))
	unknown := artSlug()
	h.authz.Deny(
		"queue:create-artifact:"+unknown+"/0",
		"queue:get-artifact:private/target",
		"queue:list-artifacts:"+unknown+":0",
		"queue:list-artifacts:"+unknown,
	)
	tests := []struct {
		name   string
		method string
		path   string
		body   map[string]any
	}{
		// Early scopes precede the 400 for an unknown task.
		{"createArtifact", http.MethodPost, artPath(unknown, 0, "artifacts", "x"), h.s3Body("text/plain", time.Hour)},
		{"finishArtifact", http.MethodPut, artPath(unknown, 0, "artifacts", "x"), map[string]any{"uploadId": artSlug()}},
		// getLatestArtifact checks the name's scope before loading the task.
		{"getLatestArtifact", http.MethodGet, artLatestPath(unknown, "artifacts", "private/target"), nil},
		{"latestArtifact", http.MethodGet, artLatestPath(unknown, "artifact-content", "private/target"), nil},
		// Following a link needs the target's scope too.
		{"getArtifact", http.MethodGet, artPath(taskID, 0, "artifacts", "public/alias"), nil},
		{"artifact", http.MethodGet, artPath(taskID, 0, "artifact-content", "public/alias"), nil},
		{"listArtifacts", http.MethodGet, fmt.Sprintf("/task/%s/runs/0/artifacts", unknown), nil},
		{"listLatestArtifacts", http.MethodGet, fmt.Sprintf("/task/%s/artifacts", unknown), nil},
		{"artifactInfo", http.MethodGet, artPath(unknown, 0, "artifact-info", "x"), nil},
		{"latestArtifactInfo", http.MethodGet, artLatestPath(unknown, "artifact-info", "x"), nil},
	}
	for _, tt := range tests {
		r := h.do(tt.method, tt.path, tt.body)
		h.requireAPIError(r, http.StatusForbidden, api.CodeInsufficientScopes, "Client lacks scopes")
		require.Equal(t, tt.name, h.ok(http.StatusForbidden, r)["requestInfo"].(map[string]any)["method"])
	}
	require.Equal(t, [][]string{{"queue:get-artifact:public/alias"}, {"queue:get-artifact:public/alias", "queue:get-artifact:private/target"}},
		h.authz.Calls("getArtifact"))

	// The info methods need only list scopes and reveal links unresolved.
	h.ok(http.StatusOK, h.do(http.MethodGet, artPath(taskID, 0, "artifact-info", "public/alias"), nil))
	require.Equal(t, [][]string{{fmt.Sprintf("queue:list-artifacts:%s:0", taskID)}}, h.authz.Calls("artifactInfo")[1:])
	h.ok(http.StatusOK, h.do(http.MethodGet, artLatestPath(taskID, "artifact-info", "public/alias"), nil))
	require.Equal(t, [][]string{{"queue:list-artifacts:" + taskID}}, h.authz.Calls("latestArtifactInfo")[1:])
}

// TestRecreateArtifactRules covers the re-creation decision directly,
// including what is kept from the stored record.
func TestRecreateArtifactRules(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	rec := func(storageType, contentType, details string, exp time.Duration) *store.Artifact {
		return &store.Artifact{TaskID: "t", Name: "n", StorageType: storageType, ContentType: contentType,
			Details: []byte(details), Expires: now.Add(exp), Present: true}
	}
	tests := []struct {
		name           string
		existing, next *store.Artifact
		wantErr        bool
	}{
		{"s3 content length changes", rec("s3", "a", `{"contentLength":1}`, time.Hour), rec("s3", "a", `{"contentLength":2}`, time.Hour), false},
		{"link to new content type", rec("link", "a", `{"artifact":"x"}`, time.Hour), rec("link", "b", `{"artifact":"x"}`, time.Hour), false},
		{"reference to link", rec("reference", "a", `{"url":"u"}`, time.Hour), rec("link", "b", `{"artifact":"x"}`, 2*time.Hour), false},
		{"link to reference", rec("link", "a", `{"artifact":"x"}`, time.Hour), rec("reference", "a", `{"url":"u"}`, time.Hour), true},
		{"reference to error", rec("reference", "a", `{"url":"u"}`, time.Hour), rec("error", "b", `{"reason":"r","message":"m"}`, time.Hour), false},
		{"reference to shorter error", rec("reference", "a", `{"url":"u"}`, time.Hour), rec("error", "b", `{"reason":"r","message":"m"}`, time.Minute), true},
		{"error to reference", rec("error", "a", `{"reason":"r","message":"m"}`, time.Hour), rec("reference", "a", `{"url":"u"}`, time.Hour), true},
		{"object repeat", rec("object", "a", `{"uploadId":"u"}`, time.Hour), rec("object", "a", `{"uploadId":"u"}`, time.Hour), true},
		{"error shortened", rec("error", "a", `{"reason":"r","message":"m"}`, time.Hour), rec("error", "a", `{"reason":"r","message":"m"}`, time.Minute), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := recreateArtifact(tt.existing, tt.next)
			if tt.wantErr {
				var qe *queue.Error
				require.ErrorAs(t, err, &qe)
				require.Equal(t, queue.KindConflict, qe.Kind)
				require.Contains(t, qe.Details, "originalArtifact")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.existing.ContentType, got.ContentType, "the stored content type is kept")
			require.Equal(t, tt.next.StorageType, got.StorageType)
			require.Equal(t, tt.next.Details, got.Details)
			require.Equal(t, tt.next.Expires, got.Expires)
		})
	}
}
