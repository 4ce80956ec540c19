package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// hostileStrings replace each string of a valid body in turn: NULs (which
// PostgreSQL's text cannot hold), other control characters, characters
// outside the BMP, long, empty and URL-escaped-looking ones.
var hostileStrings = []string{"a\x00b", "\x00", "\x01\x7f\u2028", "\U0001F600é", strings.Repeat("é", 300), "", "%00", "\ufffd", "null"}

// hostileNumbers replace each number: around every integer width, negative,
// fractional and huge.
var hostileNumbers = []any{0, -1, 1.5, 2147483648, json.Number("9223372036854775808"), json.Number("1e308")}

// bodyCase is a route sent a valid body, then that body with each of its
// values replaced by hostile ones.
type bodyCase struct {
	route  string
	method string
	// path gives the URL path of each request (a fresh task id for each
	// createTask).
	path   func() string
	body   string
	header func(body []byte) http.Header
}

// leafPaths lists the paths of a decoded body's strings and numbers.
func leafPaths(v any, prefix []any, out *[][]any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			leafPaths(x[k], append(slices.Clone(prefix), k), out)
		}
	case []any:
		for i, e := range x {
			leafPaths(e, append(slices.Clone(prefix), i), out)
		}
	case string, json.Number:
		*out = append(*out, prefix)
	}
}

// withLeaf returns a copy of body (JSON) with the value at path replaced.
func withLeaf(t *testing.T, body string, path []any, value any) []byte {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	cur := v
	for i, p := range path {
		last := i == len(path)-1
		switch k := p.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				m[k] = value
			}
			cur = m[k]
		case int:
			a := cur.([]any)
			if last {
				a[k] = value
			}
			cur = a[k]
		}
	}
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return out
}

// send sends a body signed as root and returns the status and reply.
func (r *running) send(t *testing.T, method, path string, body []byte, header http.Header) (int, string) {
	t.Helper()
	if header == nil {
		status, reply := rootCall(t, r.rootURL, method, path, string(body))
		return status, reply
	}
	req, err := http.NewRequest(method, r.rootURL+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = header
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(res.Body, 2000))
	return res.StatusCode, string(out)
}

const (
	fuzzPool        = "pp/pool"
	fuzzPoolInURL   = "pp%2Fpool"
	fuzzWebhookKey  = "fuzz-webhook-secret"
	fuzzCommit      = "91173704e61291213461cc0e78900f7b68b84f8e"
	fuzzStaticProof = "aaaaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbbb"
)

// fuzzForgeConfig writes a forge configuration: a local GitHub checking
// requests against GitHub's OpenAPI description with the App installed on
// o/r and a .taskcluster.yml at fuzzCommit, or, when the description is
// not installed, a GitHub whose API is unreachable (false: the routes that
// call the forge are left out).
func fuzzForgeConfig(t *testing.T) (string, bool) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	webhook := write("webhook", fuzzWebhookKey)
	cfg := fmt.Sprintf("forges:\n  - host: github.com\n    apiUrl: http://127.0.0.1:1\n    token: {file: %s}\n    webhookSecrets: [{file: %s}]\n",
		write("token", "fuzz-token"), webhook)
	_, err := os.Stat(forgetest.OpenAPIPath())
	if err == nil {
		gh := forgetest.Start(t)
		gh.Install("o", "r", 1)
		gh.SetFile("o", "r", fuzzCommit, ".taskcluster.yml", "version: 1\ntasks: []\n")
		cfg = fmt.Sprintf("forges:\n  - host: github.com\n    apiUrl: %s\n    appId: %d\n    privateKey: {file: %s}\n    webhookSecrets: [{file: %s}]\n",
			gh.Server.URL, gh.AppID, write("key.pem", string(gh.PEM)), webhook)
	} else {
		t.Logf("createStatus and createComment are left out: GitHub's OpenAPI description is not installed (npm ci --prefix e2e/node): %v", err)
	}
	return write("forges.yml", cfg), err == nil
}

// bodyCases are valid bodies for every route of worker-manager, notify and
// github that reads one, and for createTask, whose definitions keep NULs.
func bodyCases(secret string) []bodyCase {
	fixed := func(p string) func() string { return func() string { return p } }
	expires := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	wm, nf, gh := "/api/worker-manager/v1", "/api/notify/v1", "/api/github/v1"
	delivery, pools := 0, 0
	signed := func(body []byte) http.Header {
		delivery++
		mac := hmac.New(sha256.New, []byte(fuzzWebhookKey))
		mac.Write(body)
		return http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"push"},
			"X-Github-Delivery":   {fmt.Sprintf("fuzz-%d-%d", time.Now().UnixNano(), delivery)},
			"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac.Sum(nil))}}
	}
	task, err := json.Marshal(newTask("fuzz/q"))
	if err != nil {
		panic(err)
	}
	return []bodyCase{
		{route: "createWorkerPool", method: http.MethodPut, path: func() string { pools++; return fmt.Sprintf("%s/worker-pool/pp%%2Fp%d", wm, pools) },
			body: `{"providerId":"static","description":"d","config":{"lifecycle":{"reregistrationTimeout":3600}},"owner":"o@example.com","emailOnError":false}`},
		{route: "updateWorkerPool", method: http.MethodPost, path: fixed(wm + "/worker-pool/" + fuzzPoolInURL),
			body: `{"providerId":"static","description":"d","config":{"lifecycle":{"reregistrationTimeout":3600}},"owner":"o@example.com","emailOnError":false}`},
		{route: "reportWorkerError", method: http.MethodPost, path: fixed(wm + "/worker-pool-errors/" + fuzzPoolInURL),
			body: `{"workerGroup":"wg","workerId":"w1","kind":"k","title":"t","description":"d","extra":{"a":"b"}}`},
		{route: "createWorker", method: http.MethodPut, path: func() string { return wm + "/workers/" + fuzzPoolInURL + "/wg/w" + tcclient.NewTaskID()[:8] },
			body: `{"expires":"` + expires + `","capacity":1,"providerInfo":{"staticSecret":"` + fuzzStaticProof + `"}}`},
		{route: "updateWorker", method: http.MethodPost, path: fixed(wm + "/workers/" + fuzzPoolInURL + "/wg/w1"),
			body: `{"expires":"` + expires + `","capacity":1,"providerInfo":{"staticSecret":"` + fuzzStaticProof + `"}}`},
		{route: "registerWorker", method: http.MethodPost, path: fixed(wm + "/worker/register"),
			body: `{"workerPoolId":"` + fuzzPool + `","providerId":"static","workerGroup":"wg","workerId":"w2","workerIdentityProof":{"staticSecret":"` + fuzzStaticProof + `"}}`},
		{route: "reregisterWorker", method: http.MethodPost, path: fixed(wm + "/worker/reregister"),
			body: `{"workerPoolId":"` + fuzzPool + `","workerGroup":"wg","workerId":"w1","secret":"` + secret + `"}`},
		{route: "email", method: http.MethodPost, path: fixed(nf + "/email"),
			body: `{"address":"a@example.com","subject":"s","content":"c","link":{"text":"t","href":"https://example.com/x"},"replyTo":"r@example.com","template":"simple"}`},
		{route: "pulse", method: http.MethodPost, path: fixed(nf + "/pulse"), body: `{"routingKey":"a.b","message":{"x":"y","n":1}}`},
		{route: "matrix", method: http.MethodPost, path: fixed(nf + "/matrix"),
			body: `{"roomId":"!r:example.org","body":"b","format":"org.matrix.custom.html","formattedBody":"<b>b</b>","msgtype":"m.text"}`},
		{route: "slack", method: http.MethodPost, path: fixed(nf + "/slack"), body: `{"channelId":"C0123","text":"t","blocks":[{"type":"x"}],"attachments":[{"a":"b"}]}`},
		{route: "webhook", method: http.MethodPost, path: fixed(nf + "/webhook"), body: `{"name":"ci","message":{"a":"b"}}`},
		{route: "addDenylistAddress", method: http.MethodPost, path: fixed(nf + "/denylist/add"), body: `{"notificationType":"email","notificationAddress":"x@example.com"}`},
		{route: "deleteDenylistAddress", method: http.MethodDelete, path: fixed(nf + "/denylist/delete"), body: `{"notificationType":"email","notificationAddress":"x@example.com"}`},
		{route: "createStatus", method: http.MethodPost, path: fixed(gh + "/repository/o/r/statuses/" + fuzzCommit),
			body: `{"state":"pending","target_url":"https://example.com/x","description":"d","context":"c"}`},
		{route: "createComment", method: http.MethodPost, path: fixed(gh + "/repository/o/r/issues/1/comments"), body: `{"body":"b"}`},
		{route: "renderTaskclusterYml", method: http.MethodPost, path: fixed(gh + "/taskcluster-yml"),
			body: `{"body":"version: 1\ntasks: []\n","organization":"o","repository":"r","fakeEvent":{"type":"github-push","overrides":{"a":"b"}}}`},
		{route: "githubWebHookConsumer", method: http.MethodPost, path: fixed(gh + "/github"), header: signed,
			body: `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000001","after":"` + fuzzCommit + `","repository":{"name":"r","full_name":"o/r","owner":{"name":"o","login":"o"},"clone_url":"https://github.com/o/r.git","html_url":"https://github.com/o/r"},"sender":{"login":"o"},"installation":{"id":1},"head_commit":{"message":"m"},"commits":[{"message":"m"}]}`},
		{route: "createTask", method: http.MethodPut, path: func() string { return "/api/queue/v1/task/" + tcclient.NewTaskID() }, body: string(task)},
	}
}

// TestFuzzBodiesAnswerNo5xx: every route of worker-manager, notify and
// github that reads a body, and createTask, are sent a valid body and
// then that body with each string and number replaced by hostile values,
// on both drivers: never a 5xx. A NUL is refused with 400 everywhere but
// in a task definition, which keeps it (issue 34: a NUL in a pool's
// description, reportWorkerError's kind/title/description, a denylisted
// address or createTask's metadata.name answered 500 on PostgreSQL).
func TestFuzzBodiesAnswerNo5xx(t *testing.T) {
	t.Parallel()
	for _, d := range fuzzDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			var routes []api.Route
			forges, forgeUp := fuzzForgeConfig(t)
			r := start(t, server.Config{DB: d.db(t), ForgeConfig: forges, Routes: func(rs []api.Route) { routes = rs }})
			cases := bodyCases(fuzzSetup(t, r))
			if !forgeUp {
				cases = slices.DeleteFunc(cases, func(c bodyCase) bool { return c.route == "createStatus" || c.route == "createComment" })
			}
			covered := map[string]bool{"createStatus": true, "createComment": true}
			for _, c := range cases {
				covered[c.route] = true
			}
			for _, rt := range routes {
				if rt.Input != "" && (strings.HasPrefix(rt.Paths[0], "/api/worker-manager/") || strings.HasPrefix(rt.Paths[0], "/api/notify/") ||
					strings.HasPrefix(rt.Paths[0], "/api/github/")) {
					require.True(t, covered[rt.Name], "no body case for %s", rt.Name)
				}
			}
			sent, fives, nulRefused := 0, []string{}, 0
			for _, c := range cases {
				var hdr http.Header
				do := func(body []byte) (int, string) {
					if c.header != nil {
						hdr = c.header(body)
					}
					sent++
					status, reply := r.send(t, c.method, c.path(), body, hdr)
					if status >= 500 {
						fives = append(fives, fmt.Sprintf("%s %s: %d %s", c.route, body, status, reply))
					}
					return status, reply
				}
				status, reply := do([]byte(c.body))
				require.Less(t, status, 300, "%s with its valid body: %s", c.route, reply)
				var leaves [][]any
				dec := json.NewDecoder(strings.NewReader(c.body))
				dec.UseNumber()
				var v any
				require.NoError(t, dec.Decode(&v))
				leafPaths(v, nil, &leaves)
				for _, leaf := range leaves {
					values := []any{}
					for _, s := range hostileStrings {
						values = append(values, s)
					}
					values = append(values, hostileNumbers...)
					for _, val := range values {
						status, reply := do(withLeaf(t, c.body, leaf, val))
						if s, ok := val.(string); ok && strings.Contains(s, "\x00") && status == http.StatusBadRequest && strings.Contains(reply, "NUL character") {
							nulRefused++
							require.NotEqual(t, "createTask", c.route, "createTask keeps NULs: %v", leaf)
						}
					}
				}
			}
			t.Logf("%s: %d requests with hostile bodies to %d routes, %d answered 5xx, %d NULs refused", d.name, sent, len(cases), len(fives), nulRefused)
			require.Empty(t, fives, "replies of 500 or more:\n%s", strings.Join(fives, "\n"))
			checkNULs(t, r)
		})
	}
}

// fuzzSetup makes the rows the body cases name: a static pool with two
// workers whose proof is fuzzStaticProof, the first registered; it
// returns the first's reregistration secret.
func fuzzSetup(t *testing.T, r *running) string {
	t.Helper()
	status, reply := rootCall(t, r.rootURL, http.MethodPut, "/api/worker-manager/v1/worker-pool/"+fuzzPoolInURL,
		`{"providerId":"static","description":"d","config":{"lifecycle":{"reregistrationTimeout":3600}},"owner":"o@example.com","emailOnError":false}`)
	require.Equal(t, http.StatusOK, status, reply)
	for _, w := range []string{"w1", "w2"} {
		status, reply = rootCall(t, r.rootURL, http.MethodPut, "/api/worker-manager/v1/workers/"+fuzzPoolInURL+"/wg/"+w,
			`{"expires":"`+time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339)+`","capacity":1,"providerInfo":{"staticSecret":"`+fuzzStaticProof+`"}}`)
		require.Equal(t, http.StatusOK, status, reply)
	}
	status, reply = rootCall(t, r.rootURL, http.MethodPost, "/api/worker-manager/v1/worker/register",
		`{"workerPoolId":"`+fuzzPool+`","providerId":"static","workerGroup":"wg","workerId":"w1","workerIdentityProof":{"staticSecret":"`+fuzzStaticProof+`"}}`)
	require.Equal(t, http.StatusOK, status, reply)
	var reg struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(reply), &reg), reply)
	require.NotEmpty(t, reg.Secret)
	return reg.Secret
}

// checkNULs: a task definition keeps its NULs (the name, tags, routes,
// payload and extra read back as sent); the new services' text fields
// refuse them with 400 InputValidationError.
func checkNULs(t *testing.T, r *running) {
	t.Helper()
	def := newTask("fuzz/q")
	def.Metadata.Name = "build\x00name"
	def.Tags = map[string]string{"k\x00": "v\x00"}
	def.Routes = []string{"notify.email.a\x00b@example.com.on-any", "x\x00y"}
	def.Payload = json.RawMessage(`{"cmd":"a\u0000b"}`)
	def.Extra = json.RawMessage(`{"e":"\u0000"}`)
	body, err := json.Marshal(def)
	require.NoError(t, err)
	taskID := tcclient.NewTaskID()
	status, reply := rootCall(t, r.rootURL, http.MethodPut, "/api/queue/v1/task/"+taskID, string(body))
	require.Equal(t, http.StatusOK, status, reply)
	got, err := r.client.Task(context.Background(), taskID)
	require.NoError(t, err)
	require.Equal(t, def.Metadata.Name, got.Metadata.Name)
	require.Equal(t, def.Tags, got.Tags)
	require.Equal(t, def.Routes, got.Routes)
	require.JSONEq(t, string(def.Payload), string(got.Payload))
	require.JSONEq(t, string(def.Extra), string(got.Extra))

	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/worker-manager/v1/worker-pool/" + fuzzPoolInURL,
			`{"providerId":"static","description":"a\u0000","config":{},"owner":"o@example.com","emailOnError":false}`},
		{http.MethodPost, "/api/worker-manager/v1/worker-pool-errors/" + fuzzPoolInURL,
			`{"workerGroup":"wg","workerId":"w1","kind":"k\u0000","title":"t","description":"d","extra":{}}`},
		{http.MethodPost, "/api/worker-manager/v1/worker-pool-errors/" + fuzzPoolInURL,
			`{"workerGroup":"wg","workerId":"w1","kind":"k","title":"\u0000","description":"d\u0000","extra":{}}`},
		{http.MethodPost, "/api/notify/v1/denylist/add", `{"notificationType":"email","notificationAddress":"a\u0000@example.com"}`},
		{http.MethodPost, "/api/notify/v1/email", `{"address":"a@example.com","subject":"s\u0000","content":"c"}`},
	} {
		status, reply := rootCall(t, r.rootURL, c.method, c.path, c.body)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.body, reply)
		require.Contains(t, reply, `"code":"InputValidationError"`, c.body)
		require.Contains(t, reply, "NUL character", c.body)
	}
}
