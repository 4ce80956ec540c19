package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// hostileSegments are path parameter values (already escaped for the URL):
// encoded NUL and bytes that are not UTF-8, numbers around every integer
// width, long, empty-ish and dotted ones, beside ordinary ones.
var hostileSegments = []string{
	"a", "0", "1", "-1", "1e3", "007", "%00", "a%00b", "%FF", "%C3%28", "%E2%82", "%F0%9F%98%80",
	"2147483647", "2147483648", "4294967296", "9223372036854775807", "9223372036854775808",
	"99999999999999999999999", "..", ".", "%2E%2E", "%2F", "a%2Fb", "~", "%20", "%0A", "%5C",
	strings.Repeat("a", 300), strings.Repeat("%E2%82%AC", 100), "fN1SbArXTPSVFNUvaOlinQ", "null", "true",
}

// hostileQuery are query values: the same, plus continuation tokens that
// decode to NUL, bytes that are not UTF-8, and nothing base64 at all.
var hostileQuery = append([]string{
	"AA", "_w", "AAAA", "w4g", base64.RawURLEncoding.EncodeToString([]byte("1|\x00")),
	base64.RawURLEncoding.EncodeToString([]byte("99999999999999999999|x")), "!!", "",
}, hostileSegments...)

var pathParam = regexp.MustCompile(`\{([A-Za-z]+)(\.\.\.)?\}`)

// fuzzRoutes sends every route requests whose path parameters and query
// values are drawn from the hostile sets above (each value in each
// position once, then seeded random mixes), signed as root or anonymous,
// and returns every reply of 500 or more.
func fuzzRoutes(t *testing.T, rootURL string, routes []api.Route, ordinaryValues map[string]string, randomPerPath int) (sent int, failures []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(30, 30))
	client := &http.Client{Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	creds := hawk.Credentials{ID: server.RootClientID, Key: testRootToken}
	// query holds values escaped already (hostile bytes stay hostile).
	do := func(rt api.Route, path string, query map[string]string, signed bool) {
		raw := rootURL + path
		sep := "?"
		for k, v := range query {
			raw += sep + url.QueryEscape(k) + "=" + v
			sep = "&"
		}
		var body io.Reader
		if rt.Method != http.MethodGet && rt.Method != http.MethodHead {
			body = strings.NewReader("{}")
		}
		req, err := http.NewRequest(rt.Method, raw, body)
		if err != nil {
			return // a URL net/http cannot send is no request
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if signed {
			h, err := hawk.RequestHeader(creds, rt.Method, raw, time.Now(), "", "", "")
			require.NoError(t, err)
			req.Header.Set("Authorization", h)
		}
		sent++
		res, err := client.Do(req)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s %s %s: %v", rt.Name, rt.Method, raw, err))
			return
		}
		var head [300]byte
		n, _ := io.ReadFull(res.Body, head[:])
		res.Body.Close()
		if res.StatusCode >= 500 {
			failures = append(failures, fmt.Sprintf("%s %s %s: %d %s", rt.Name, rt.Method, raw, res.StatusCode, head[:n]))
		}
	}
	for _, rt := range routes {
		for _, tmpl := range rt.Paths {
			names := pathParam.FindAllStringSubmatch(tmpl, -1)
			fill := func(pick func(i int) string) string {
				i := -1
				return pathParam.ReplaceAllStringFunc(tmpl, func(string) string { i++; return pick(i) })
			}
			ordinary := func(i int) string {
				if v, ok := ordinaryValues[names[i][1]]; ok {
					return v
				}
				return "a"
			}
			// Each hostile value in each parameter, the others ordinary.
			for p := range names {
				for _, v := range hostileSegments {
					do(rt, fill(func(i int) string {
						if i == p {
							return v
						}
						return ordinary(i)
					}), nil, true)
				}
			}
			// Each hostile value in each query parameter.
			for _, q := range rt.Query {
				for _, v := range hostileQuery {
					do(rt, fill(ordinary), map[string]string{q: v}, true)
				}
			}
			// Random mixes, signed or not.
			for range randomPerPath {
				query := map[string]string{}
				for _, q := range rt.Query {
					if rng.IntN(2) == 0 {
						query[q] = hostileQuery[rng.IntN(len(hostileQuery))]
					}
				}
				do(rt, fill(func(int) string { return hostileSegments[rng.IntN(len(hostileSegments))] }), query, rng.IntN(3) > 0)
			}
		}
	}
	return sent, failures
}

// fuzzDrivers are the stores the whole-server tests below run on: an
// embedded SQLite (the empty DB setting) and a fresh PostgreSQL schema.
var fuzzDrivers = []struct {
	name string
	db   func(t *testing.T) string
}{
	{"sqlite", func(*testing.T) string { return "" }},
	{"postgres", func(t *testing.T) string { return e2e.FreshPostgres(t) }},
}

// TestFuzzEveryRouteAnswersNo5xx: every route of a whole server, on each
// driver, answers hostile path parameters and query values with a 4xx (or
// a success), never a 5xx. It found forged continuation tokens (500 on 12
// list methods on PostgreSQL) and runIds above 2^31-1 (500 on the
// artifact methods on PostgreSQL).
func TestFuzzEveryRouteAnswersNo5xx(t *testing.T) {
	t.Parallel()
	for _, d := range fuzzDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			var routes []api.Route
			// The forge's routes call it: a forge only when the local
			// GitHub can run (without it, they answer 500 for the
			// unreachable forge's sake, not their own).
			forges, up := fuzzForgeConfig(t)
			if !up {
				forges = ""
			}
			r := start(t, server.Config{DB: d.db(t), LongPoll: 50 * time.Millisecond, ForgeConfig: forges, Routes: func(rs []api.Route) { routes = rs }})
			require.NotEmpty(t, routes)
			// Some rows, so the lists have something to page through, and
			// a task with a run whose artifacts the run's routes look up:
			// each hostile value goes beside ordinary values that name it.
			ctx := context.Background()
			taskID := tcclient.NewTaskID()
			for _, id := range []string{taskID, tcclient.NewTaskID(), tcclient.NewTaskID()} {
				_, err := r.client.CreateTask(ctx, id, newTask("a/a"))
				require.NoError(t, err)
			}
			// A worker pool with registered workers, a notification, a
			// stored webhook delivery: the new services' routes look up
			// rows that exist.
			fuzzSetup(t, r)
			status, reply := rootCall(t, r.rootURL, http.MethodPost, "/api/notify/v1/email", `{"address":"a@example.com","subject":"s","content":"c"}`)
			require.Equal(t, http.StatusOK, status, reply)
			ordinary := map[string]string{"taskId": taskID, "taskGroupId": taskID, "runId": "0", "provisionerId": "a",
				"workerType": "a", "taskQueueId": "a%2Fa", "tqProvisioner": "a", "tqWorkerType": "a", "name": "public%2Fx",
				"workerPoolId": fuzzPoolInURL, "wpProvisioner": "pp", "wpWorkerType": "pool", "workerGroup": "wg", "workerId": "w1",
				"owner": "o", "repo": "r", "branch": "main", "sha": fuzzCommit, "number": "1", "host": "github.com"}
			sent, failures := fuzzRoutes(t, r.rootURL, routes, ordinary, 4)
			t.Logf("%s: %d requests to %d routes, %d answered 5xx", d.name, sent, len(routes), len(failures))
			require.Empty(t, failures, "replies of 500 or more:\n%s", strings.Join(failures, "\n"))
		})
	}
}

// TestRunIDsOutsideTheSchemaAreRefused: a runId outside 0-1000 (the
// schemas' range) is answered 400 on every route that names a run, with a
// body each route would otherwise accept, on both drivers; PostgreSQL
// answered 500 for values from 2^31 on.
func TestRunIDsOutsideTheSchemaAreRefused(t *testing.T) {
	t.Parallel()
	for _, d := range fuzzDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			var routes []api.Route
			r := start(t, server.Config{DB: d.db(t), Routes: func(rs []api.Route) { routes = rs }})
			ctx := context.Background()
			taskID := tcclient.NewTaskID()
			_, err := r.client.CreateTask(ctx, taskID, newTask("runid/q"))
			require.NoError(t, err)
			claims, err := r.client.ClaimWork(ctx, "runid/q", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
			require.NoError(t, err)
			require.Len(t, claims.Tasks, 1)
			bodies := map[string]string{
				"createArtifact":  `{"storageType":"reference","expires":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `","url":"https://example.com"}`,
				"reportException": `{"reason":"malformed-payload"}`,
				"claimTask":       `{"workerGroup":"g","workerId":"w"}`,
				"finishArtifact":  `{"uploadId":"aaaaaaaaaaaaaaaaaaaaaa"}`,
			}
			checked := 0
			for _, rt := range routes {
				for _, tmpl := range rt.Paths {
					if !strings.Contains(tmpl, "{runId}") {
						continue
					}
					for _, runID := range []string{"1001", "2147483648", "9223372036854775807", "9223372036854775808"} {
						path := strings.NewReplacer("{taskId}", taskID, "{runId}", runID, "{name...}", "public%2Fx").Replace(tmpl)
						body := bodies[rt.Name]
						if body == "" && rt.Method != http.MethodGet {
							body = "{}"
						}
						status, reply := rootCall(t, r.rootURL, rt.Method, path, body)
						require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", rt.Name, path, reply)
						require.Contains(t, reply, `"code":"InvalidRequestArguments"`, "%s %s", rt.Name, path)
						checked++
					}
					// In range, the route answers as it always did.
					path := strings.NewReplacer("{taskId}", taskID, "{runId}", "0", "{name...}", "public%2Fx").Replace(tmpl)
					status, reply := rootCall(t, r.rootURL, rt.Method, path, bodies[rt.Name])
					require.Less(t, status, 500, "%s %s: %s", rt.Name, path, reply)
				}
			}
			require.GreaterOrEqual(t, checked, 4*10, "every route naming a run was tried")
		})
	}
}

// rootCall sends body (none if "") to path, signed as root, and returns the
// status and the reply's start.
func rootCall(t *testing.T, rootURL, method, path, body string) (int, string) {
	t.Helper()
	var rdr io.Reader
	if body != "" {
		rdr = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, rootURL+path, rdr)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	h, err := hawk.RequestHeader(hawk.Credentials{ID: server.RootClientID, Key: testRootToken}, method, rootURL+path, time.Now(), "", "", "")
	require.NoError(t, err)
	req.Header.Set("Authorization", h)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(res.Body, 2000))
	return res.StatusCode, string(out)
}
