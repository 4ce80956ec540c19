package cli

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoopbackCallback: what the browser brings to `hopper login`'s port
// decides the outcome and its exit code; only a code with this sign-in's
// state is used, and only the first visit counts.
func TestLoopbackCallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, query string
		code        string
		exit        int
		says        string
	}{
		{name: "a code with the state", query: "code=c1&state=good-state", code: "c1"},
		{name: "another state", query: "code=c1&state=forged", exit: ExitFailed, says: "another sign-in's state"},
		{name: "no state", query: "code=c1", exit: ExitFailed, says: "another sign-in's state"},
		{name: "denied", query: "error=access_denied&state=good-state", exit: ExitFailed, says: "you denied the command"},
		{name: "provider down", query: "error=temporarily_unavailable&error_description=Corp+cannot+be+reached&state=good-state",
			exit: ExitUnavailable, says: "Corp cannot be reached"},
		{name: "another error", query: "error=server_error&error_description=boom&state=good-state", exit: ExitFailed, says: "server_error: boom"},
		{name: "no code", query: "state=good-state", exit: ExitFailed, says: "without a code"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			results := make(chan callbackResult, 1)
			h := loopbackHandler("good-state", results)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/callback?"+tc.query, nil))
			require.Equal(t, "no-referrer", w.Header().Get("Referrer-Policy"))
			res := <-results
			if tc.exit == 0 {
				require.NoError(t, res.err)
				require.Equal(t, tc.code, res.code)
				require.Equal(t, http.StatusOK, w.Code)
			} else {
				var exit *ExitError
				require.True(t, errors.As(res.err, &exit), "%v", res.err)
				require.Equal(t, tc.exit, exit.Code)
				require.Contains(t, exit.Msg, tc.says)
				require.Contains(t, exit.Msg, "nothing was written")
				require.Empty(t, res.code)
			}
			// A second visit is refused and changes nothing.
			w = httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/callback?code=c2&state=good-state", nil))
			require.Equal(t, http.StatusConflict, w.Code)
			require.Empty(t, results)
		})
	}
}
