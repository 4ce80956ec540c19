package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/hop"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/wsmux"
)

// TestWebsocktunnelAcrossReplicas: two `hopper serve` replicas share one
// PostgreSQL database; a tunnel client registered with replica B is
// reached through replica A (A finds B in the shared directory and
// forwards one signed hop), a request claiming to be a hop with a forged
// signature is refused, and once the client is gone neither replica
// finds it.
func TestWebsocktunnelAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	args := []string{"--db", db}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	ctx := context.Background()
	tok, err := rootClient(a).WebsocktunnelToken(ctx, "hopper", "replicas.worker-1")
	require.NoError(t, err)
	conn, _, err := websocket.Dial(ctx, b.RootURL+"/websocktunnel", &websocket.DialOptions{HTTPHeader: http.Header{
		"x-websocktunnel-id": {"replicas.worker-1"}, "Authorization": {"Bearer " + tok.Token}}})
	require.NoError(t, err)
	conn.SetReadLimit(-1)
	session := wsmux.NewSession(conn, false)
	go func() {
		_ = http.Serve(tunnelListener{session}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "live log of "+r.URL.RequestURI()+" range "+r.Header.Get("Range")+"\n")
		}))
	}()

	get := func(url string, header http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, srv := range []*e2e.Server{b, a} {
		status, body := get(srv.RootURL+"/websocktunnel/replicas.worker-1/log/abc?x=1", http.Header{"Range": {"bytes=5-"}})
		require.Equal(t, http.StatusOK, status, "through %s: %s", srv.RootURL, body)
		require.Equal(t, "live log of /log/abc?x=1 range bytes=5-\n", body, "through %s", srv.RootURL)
	}
	require.Contains(t, a.Logs(), "forwarded", "A served the viewer through B")

	status, body := get(b.RootURL+"/websocktunnel/replicas.worker-1/log/abc", http.Header{hop.Header: {"1700000000.00ff"}})
	require.Equal(t, http.StatusUnauthorized, status, body)

	require.NoError(t, session.Close())
	testclock.WaitFor(t, time.Minute, "the tunnel's row to go", func() bool {
		status, _ := get(a.RootURL+"/websocktunnel/replicas.worker-1/log/abc", nil)
		return status == http.StatusGatewayTimeout
	})
	status, body = get(b.RootURL+"/websocktunnel/replicas.worker-1/log/abc", nil)
	require.Equal(t, http.StatusGatewayTimeout, status, body)
	require.True(t, strings.Contains(body, "No client"), body)
}
