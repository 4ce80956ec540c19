package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// rawSigned sends body to rawURL exactly as written (no path cleaning, no
// escaping), Hawk-signed with the root credentials, and does not follow
// redirects.
func rawSigned(t *testing.T, srv *e2e.Server, method, rawURL string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	var rdr io.Reader
	if body != nil {
		rdr = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, rawURL, rdr)
	require.NoError(t, err)
	header, err := hawk.RequestHeader(hawk.Credentials{ID: srv.ClientID, Key: srv.Token}, method, rawURL, time.Now(), "", "", "")
	require.NoError(t, err)
	req.Header.Set("Authorization", header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

// TestInvalidUTF8IsReplacedOnEveryStore: bytes that are not UTF-8 inside
// any string of a createTask body (payload, extra, metadata, tags) are
// stored as U+FFFD, on SQLite and PostgreSQL alike, and the task is served
// back as valid UTF-8.
func TestInvalidUTF8IsReplacedOnEveryStore(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"sqlite", func(*testing.T) []string { return nil }},
		{"postgres", func(t *testing.T) []string { return []string{"--db", e2e.FreshPostgres(t)} }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			srv := e2e.StartServer(t, e2e.ServerOptions{Args: st.args(t)})
			now := time.Now().UTC()
			body := fmt.Sprintf(`{"taskQueueId":"e2e-utf8/q","created":%q,"deadline":%q,`+
				`"payload":{"command":[["echo","a\xffb"]],"env":{"K":"\xc3"}},"extra":{"note":"\xfe\xfd"},"tags":{"t":"x\x80"},`+
				`"metadata":{"name":"n\xff","description":"d","owner":"me@example.com","source":"https://example.com"}}`,
				now.Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
			// The format is a raw string: put the bytes in now.
			body = strings.NewReplacer(`\xff`, "\xff", `\xc3`, "\xc3", `\xfe`, "\xfe", `\xfd`, "\xfd", `\x80`, "\x80").Replace(body)
			require.False(t, utf8.ValidString(body))
			taskID := tcclient.NewTaskID()
			status, _, reply := rawSigned(t, srv, http.MethodPut, srv.RootURL+"/api/queue/v1/task/"+taskID, []byte(body))
			require.Equal(t, http.StatusOK, status, "%s", reply)
			require.True(t, utf8.Valid(reply))

			resp, err := http.Get(srv.RootURL + "/api/queue/v1/task/" + taskID)
			require.NoError(t, err)
			defer resp.Body.Close()
			def, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", def)
			require.True(t, utf8.Valid(def), "the stored definition is served as UTF-8")
			var got struct {
				Payload struct {
					Command [][]string        `json:"command"`
					Env     map[string]string `json:"env"`
				} `json:"payload"`
				Extra    map[string]string `json:"extra"`
				Tags     map[string]string `json:"tags"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(def, &got))
			require.Equal(t, "a\uFFFDb", got.Payload.Command[0][1])
			require.Equal(t, "\uFFFD", got.Payload.Env["K"])
			require.Equal(t, "\uFFFD\uFFFD", got.Extra["note"])
			require.Equal(t, "x\uFFFD", got.Tags["t"])
			require.Equal(t, "n\uFFFD", got.Metadata.Name)
		})
	}
}

// TestUncleanArtifactNames: artifact names with "//", "/./", "/../" or a
// leading "/" sent with raw slashes are taken verbatim, as Taskcluster
// does, never redirected to a cleaned path (where the Hawk signature would
// fail with a misleading 401). Other non-canonical API paths are 404. The
// access log has a line for each request, with no credential in it, and
// --pprof serves the profiling endpoints.
func TestUncleanArtifactNames(t *testing.T) {
	t.Parallel()
	pprofAddr := e2e.FreePort(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--pprof", pprofAddr}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := claimTask(ctx, t, srv, nil)
	expires := tcclient.NewTime(time.Now().Add(time.Hour)).String()

	names := []string{"public//double", "public/./dot", "/leading", "public/../up", "public/x//", "public/.."}
	base := srv.RootURL + "/api/queue/v1/task/" + c.taskID
	for _, name := range names {
		body, err := json.Marshal(map[string]string{"storageType": "reference", "expires": expires, "contentType": "text/plain", "url": "https://example.com/" + c.taskID})
		require.NoError(t, err)
		status, _, reply := rawSigned(t, srv, http.MethodPost, base+"/runs/0/artifacts/"+name, body)
		require.Equal(t, http.StatusOK, status, "createArtifact %q: %s", name, reply)

		status, header, reply := rawSigned(t, srv, http.MethodGet, base+"/runs/0/artifacts/"+name, nil)
		require.Equal(t, http.StatusSeeOther, status, "getArtifact %q: %s", name, reply)
		require.Equal(t, "https://example.com/"+c.taskID, header.Get("Location"))
		status, _, reply = rawSigned(t, srv, http.MethodGet, base+"/artifacts/"+name, nil)
		require.Equal(t, http.StatusSeeOther, status, "getLatestArtifact %q: %s", name, reply)
	}
	list, err := c.root.ListArtifacts(ctx, c.taskID, 0, tcclient.ListOptions{})
	require.NoError(t, err)
	var listed []string
	for _, a := range list.Artifacts {
		listed = append(listed, a.Name)
	}
	for _, name := range names {
		require.Contains(t, listed, name)
	}

	for _, p := range []string{"/api/queue/v1//ping", "/api/queue/v1/./ping", "/api/queue/v1/task/" + c.taskID + "/../" + c.taskID} {
		status, header, reply := rawSigned(t, srv, http.MethodGet, srv.RootURL+p, nil)
		require.Equal(t, http.StatusNotFound, status, "%s: %s", p, reply)
		require.Empty(t, header.Get("Location"))
	}

	// Requests that reach no API route are logged too (no method name).
	resp, err := http.Get(srv.RootURL + "/robots.txt?bewit=not-logged")
	require.NoError(t, err)
	resp.Body.Close()

	// The access log line is written once the response has gone out, so
	// it may land just after the client has read the answer.
	robots := regexp.MustCompile(`msg=request verb=GET path=/robots.txt status=200 duration=\S+\n`)
	require.Eventually(t, func() bool { return robots.MatchString(srv.Logs()) }, 5*time.Second, 10*time.Millisecond,
		"no access log line for /robots.txt:\n%s", srv.Logs())
	logs := srv.Logs()
	require.NotContains(t, logs, "not-logged")
	require.Contains(t, logs, "msg=request verb=POST")
	require.Regexp(t, `msg=request .*method=createArtifact status=200 duration=\S+ clientId=static/taskcluster/root`, logs)
	require.Regexp(t, `msg=request verb=GET path=/api/queue/v1/ping method=ping status=200 duration=\S+ clientId=""`, logs)
	require.NotContains(t, logs, srv.Token)
	require.NotContains(t, logs, "mac=")
	require.NotContains(t, logs, c.worker.Credentials.AccessToken)

	resp, err = http.Get("http://" + pprofAddr + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get(srv.RootURL + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "profiling stays off the API listener")
}
