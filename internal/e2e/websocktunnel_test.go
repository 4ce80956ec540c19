package e2e_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/wsmux"
)

// tunnelConn is a wsmux stream as the net.Conn http.Serve wants.
type tunnelConn struct{ *wsmux.Stream }

type tunnelAddr struct{}

func (tunnelAddr) Network() string                  { return "wsmux" }
func (tunnelAddr) String() string                   { return "wsmux" }
func (tunnelConn) LocalAddr() net.Addr              { return tunnelAddr{} }
func (tunnelConn) RemoteAddr() net.Addr             { return tunnelAddr{} }
func (tunnelConn) SetDeadline(time.Time) error      { return nil }
func (tunnelConn) SetReadDeadline(time.Time) error  { return nil }
func (tunnelConn) SetWriteDeadline(time.Time) error { return nil }

type tunnelListener struct{ s *wsmux.Session }

func (l tunnelListener) Accept() (net.Conn, error) {
	st, err := l.s.Accept(context.Background())
	if err != nil {
		return nil, err
	}
	return tunnelConn{st}, nil
}
func (l tunnelListener) Close() error   { return l.s.Close() }
func (l tunnelListener) Addr() net.Addr { return tunnelAddr{} }

// TestWebsocktunnelThroughHopperServe: a client with a token from the
// server's auth.websocktunnelToken registers with the server's own
// websocktunnel, and a viewer reaches what it serves through the server's
// URL, as generic-worker's live log is reached.
func TestWebsocktunnelThroughHopperServe(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx := context.Background()
	tok, err := root.WebsocktunnelToken(ctx, "hopper", "e2e.worker-1")
	require.NoError(t, err)
	conn, resp, err := websocket.Dial(ctx, srv.RootURL+"/websocktunnel", &websocket.DialOptions{HTTPHeader: http.Header{
		"x-websocktunnel-id": {"e2e.worker-1"}, "Authorization": {"Bearer " + tok.Token}}})
	require.NoError(t, err)
	conn.SetReadLimit(-1)
	url := resp.Header.Get("x-websocktunnel-client-url")
	require.Equal(t, srv.RootURL+"/websocktunnel/e2e.worker-1", url)
	session := wsmux.NewSession(conn, false)
	defer session.Close()
	go func() {
		_ = http.Serve(tunnelListener{session}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "live log of "+r.URL.Path+"\n")
		}))
	}()
	res, err := http.Get(url + "/log/abc")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "live log of /log/abc\n", string(body))

	// A token for another tunnel client is refused.
	_, _, err = websocket.Dial(ctx, srv.RootURL+"/websocktunnel", &websocket.DialOptions{HTTPHeader: http.Header{
		"x-websocktunnel-id": {"e2e.worker-2"}, "Authorization": {"Bearer " + tok.Token}}})
	require.ErrorContains(t, err, "401")
}
