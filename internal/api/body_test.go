package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
		var whole, bytewise bodyScan
		whole.feed([]byte(tt.json))
		for i := range len(tt.json) {
			bytewise.feed([]byte(tt.json[i : i+1]))
		}
		for _, s := range []bodyScan{whole, bytewise} {
			require.Equal(t, tt.values, s.values, tt.json)
			require.Equal(t, tt.depth, s.maxDepth, tt.json)
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
