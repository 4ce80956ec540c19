package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/schema"
)

func TestBodyScanCountsValuesAndDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		json          string
		values, depth int
	}{
		{`{}`, 1, 1},
		{`{"a":1,"b":[true,null,"x"]}`, 8, 2}, // keys count too
		{`[{},{},{}]`, 4, 2},
		{`"a string with { and [ and \" inside"`, 1, 0},
		{`{"k":"\\"}`, 3, 1},
		{` [ 1 , -2.5e3 , [ [ ] ] ] `, 5, 3},
	}
	for _, tt := range tests {
		// Fed whole, and one byte at a time: the same counts.
		var whole, bytewise schema.Scanner
		whole.Feed([]byte(tt.json))
		for i := range len(tt.json) {
			bytewise.Feed([]byte(tt.json[i : i+1]))
		}
		for _, s := range []schema.Scanner{whole, bytewise} {
			require.Equal(t, tt.values, s.Values, tt.json)
			require.Equal(t, tt.depth, s.MaxDepth, tt.json)
		}
	}
}

func TestBodyBudgetWaitsThenRefuses(t *testing.T) {
	t.Parallel()
	b := newBodyBudget(100)
	ctx := context.Background()
	require.NoError(t, b.acquire(ctx, 60, time.Now().Add(time.Second)))
	// No room: refused once the wait is over.
	require.ErrorIs(t, b.acquire(ctx, 60, time.Now().Add(10*time.Millisecond)), errBodyBudget)
	// Room freed while waiting: the wait ends with it.
	done := make(chan error, 1)
	go func() { done <- b.acquire(ctx, 60, time.Now().Add(time.Minute)) }()
	b.release(60)
	require.NoError(t, <-done)
	b.release(60)
	require.NoError(t, b.acquire(ctx, 100, time.Now()))
}

type permitAll struct{}

func (permitAll) Authorize(*Call, string, map[string]any) error { return nil }

// TestCallsHoldOnlyWhatTheirBodiesCost: while a call's handler runs, the
// call holds from the body budget what its body costs, nothing for no body.
// A call without a body may last (a live stream), and each once held a
// whole chunk: 1,536 open streams took the budget, and every call with a
// body was answered 503.
func TestCallsHoldOnlyWhatTheirBodiesCost(t *testing.T) {
	t.Parallel()
	var srv *Server
	held := make(chan int64, 1)
	record := func(c *Call) (any, error) {
		srv.bodies.mu.Lock()
		held <- bodyBudgetBytes - srv.bodies.free
		srv.bodies.mu.Unlock()
		return map[string]any{}, nil
	}
	srv, err := New(Options{Authorizer: permitAll{}, Routes: []Route{
		{Name: "stream", Method: http.MethodGet, Paths: []string{"/api/x/v1/stream"}, Handle: record},
		{Name: "put", Method: http.MethodPut, Paths: []string{"/api/x/v1/put"}, Input: "claim-work-request", Handle: record},
	}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	small := `{"workerGroup":"g","workerId":"w","tasks":1}`
	for _, tc := range []struct {
		name, method, path, body string
		chunked                  bool
		atMost                   int64
	}{
		{name: "no body", method: http.MethodGet, path: "/api/x/v1/stream", atMost: 0},
		{name: "small body of declared length", method: http.MethodPut, path: "/api/x/v1/put", body: small,
			atMost: int64(len(small)) + 1 + 7*bytesPerValue},
		{name: "small body sent chunked", method: http.MethodPut, path: "/api/x/v1/put", body: small, chunked: true,
			atMost: bodyChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
				if tc.chunked {
					body = io.MultiReader(body) // length unknown to the client: chunked
				}
			}
			req, err := http.NewRequest(tc.method, hs.URL+tc.path, body)
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			got := <-held
			require.LessOrEqual(t, got, tc.atMost)
		})
	}
}

// TestBodyLimitsFromSchemas: a route's body limits come from its request
// schema: what the largest valid body holds, within the minimums and
// DefaultBodyLimits.
func TestBodyLimitsFromSchemas(t *testing.T) {
	t.Parallel()
	srv, err := New(Options{Authorizer: permitAll{}})
	require.NoError(t, err)
	for _, tt := range []struct {
		input string
		want  BodyLimits
	}{
		// Three short properties: the minimums.
		{"claim-work-request", BodyLimits{MaxBytes: minBodyBytes, MaxValues: minBodyValues, MaxDepth: minBodyDepth}},
		// A free-form payload: Taskcluster's 10 MB.
		{"create-task-request", DefaultBodyLimits},
		// A URL of any length, but a handful of properties.
		{"post-artifact-request", BodyLimits{MaxBytes: DefaultBodyLimits.MaxBytes, MaxValues: minBodyValues, MaxDepth: minBodyDepth}},
		// Strings of bounded length, larger than the minimum: subject
		// 255, content 102,400 characters (12 bytes each escaped), ….
		{"notify-email-request", BodyLimits{MaxBytes: 1_252_032, MaxValues: minBodyValues, MaxDepth: minBodyDepth}},
		{"no-such-schema", DefaultBodyLimits},
	} {
		require.Equal(t, tt.want, srv.bodyLimitsFor(tt.input), tt.input)
	}
}

// TestSmallBodyRouteRefusesLargeBodyEarly: a route whose schema bounds its
// bodies small (or that has none, taking no body) answers 413
// InputTooLarge to a larger one before it is sent (by its declared length)
// or once it passes the limit (sent chunked), where a route that takes
// large bodies reads the same body.
func TestSmallBodyRouteRefusesLargeBodyEarly(t *testing.T) {
	t.Parallel()
	ok := func(*Call) (any, error) { return map[string]any{}, nil }
	srv, err := New(Options{Authorizer: permitAll{}, Routes: []Route{
		{Name: "claimWork", Method: http.MethodPost, Paths: []string{"/api/x/v1/claim"}, Input: "claim-work-request", Handle: ok},
		{Name: "createTask", Method: http.MethodPost, Paths: []string{"/api/x/v1/task"}, Input: "create-task-request", Handle: ok},
		{Name: "cancelTask", Method: http.MethodPost, Paths: []string{"/api/x/v1/cancel"}, Handle: ok}, // takes no body
	}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	// Declared 1 MiB, nothing sent: the answer comes anyway.
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	// Without the limit the server would wait for the body: fail, not hang.
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "POST /api/x/v1/claim HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 1<<20)
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	res.Body.Close()

	// 100 KB of a valid shape, sent chunked: refused by the small route
	// once read past its limit, read whole by the large one (which then
	// finds it invalid).
	big := `{"workerGroup":"g","workerId":"w","tasks":1,"x":"` + strings.Repeat("x", 100<<10) + `"}`
	for _, tt := range []struct {
		path string
		want int
		code string
	}{
		{"/api/x/v1/claim", http.StatusRequestEntityTooLarge, CodeInputTooLarge},
		{"/api/x/v1/cancel", http.StatusRequestEntityTooLarge, CodeInputTooLarge},
		{"/api/x/v1/task", http.StatusBadRequest, "InputValidationError"},
	} {
		req, err := http.NewRequest(http.MethodPost, hs.URL+tt.path, io.MultiReader(strings.NewReader(big)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var body struct{ Code string }
		require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
		res.Body.Close()
		require.Equal(t, tt.want, res.StatusCode, tt.path)
		require.Equal(t, tt.code, body.Code, tt.path)
	}
}
