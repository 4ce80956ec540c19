package tunnel_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/tunnel"
	"github.com/hopper-ci/hopper/internal/wsmux"
)

var secret = []byte("tunnel test secret")

// streamConn is a wsmux stream as the net.Conn http.Serve wants.
type streamConn struct{ *wsmux.Stream }

type addr struct{}

func (addr) Network() string                        { return "wsmux" }
func (addr) String() string                         { return "wsmux" }
func (streamConn) LocalAddr() net.Addr              { return addr{} }
func (streamConn) RemoteAddr() net.Addr             { return addr{} }
func (streamConn) SetDeadline(time.Time) error      { return nil }
func (streamConn) SetReadDeadline(time.Time) error  { return nil }
func (streamConn) SetWriteDeadline(time.Time) error { return nil }

// listener accepts a tunnel client's streams.
type listener struct{ s *wsmux.Session }

func (l listener) Accept() (net.Conn, error) {
	st, err := l.s.Accept(context.Background())
	if err != nil {
		return nil, err
	}
	return streamConn{st}, nil
}
func (l listener) Close() error   { return l.s.Close() }
func (l listener) Addr() net.Addr { return addr{} }

func token(id string, at time.Time) string {
	return auth.SignTunnelToken(secret, auth.TunnelClaims{TunnelID: id, Audience: tunnel.Audience, IssuedAt: at.Unix(),
		NotBefore: at.Add(-time.Minute).Unix(), Expires: at.Add(time.Hour).Unix()})
}

// register connects a tunnel client as a worker does and serves h on it.
func register(t testing.TB, base, id, tok string) (*wsmux.Session, string, error) {
	t.Helper()
	header := http.Header{"x-websocktunnel-id": {id}, "Authorization": {"Bearer " + tok}}
	conn, resp, err := websocket.Dial(context.Background(), base+tunnel.Prefix, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		return nil, "", err
	}
	conn.SetReadLimit(-1)
	return wsmux.NewSession(conn, false), resp.Header.Get("x-websocktunnel-client-url"), nil
}

func TestTunnel(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	defer srv.Close()
	tun := tunnel.New(secret, srv.URL, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	defer tun.Close()
	mux := http.NewServeMux()
	mux.Handle(tunnel.Prefix, tun)
	mux.Handle(tunnel.Prefix+"/", tun)
	srv.Config.Handler = mux

	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	worker := http.NewServeMux()
	worker.HandleFunc("/log/live.log", func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/websocktunnel/wg.w1/log/live.log", r.Header.Get("x-websocktunnel-original-path"))
		_, _ = io.WriteString(w, "first line\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "second line, query "+r.URL.RawQuery+"\n")
	})
	worker.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) })
	worker.HandleFunc("/shell", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(context.Background())
			if err != nil {
				return
			}
			_ = c.Write(context.Background(), typ, bytes.ToUpper(msg))
		}
	})

	_, _, err := register(t, srv.URL, "wg.w1", token("wg.w2", time.Now()))
	require.ErrorContains(t, err, "401", "a token for another tunnel")
	session, url, err := register(t, srv.URL, "wg.w1", token("wg.w1", time.Now()))
	require.NoError(t, err)
	require.Equal(t, srv.URL+"/websocktunnel/wg.w1", url)
	go func() { _ = http.Serve(listener{session}, worker) }()

	res, err := http.Get(url + "/log/live.log?x=1")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "first line\nsecond line, query x=1\n", string(body))

	res, err = http.Get(url + "/big")
	require.NoError(t, err)
	body, err = io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.True(t, bytes.Equal(big, body), "3 MiB through the tunnel's flow control, got %d bytes", len(body))

	ws, _, err := websocket.Dial(context.Background(), strings.Replace(url, "http", "ws", 1)+"/shell", nil)
	require.NoError(t, err)
	require.NoError(t, ws.Write(context.Background(), websocket.MessageBinary, []byte("echo $TASK_ID")))
	_, msg, err := ws.Read(context.Background())
	require.NoError(t, err)
	require.Equal(t, "ECHO $TASK_ID", string(msg))
	_ = ws.CloseNow()

	res, err = http.Get(srv.URL + "/websocktunnel/nobody/log")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusGatewayTimeout, res.StatusCode)

	// A reconnecting client replaces its session.
	again, _, err := register(t, srv.URL, "wg.w1", token("wg.w1", time.Now()))
	require.NoError(t, err)
	<-session.Done()
	go func() { _ = http.Serve(listener{again}, worker) }()
	res, err = http.Get(url + "/log/live.log")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}
