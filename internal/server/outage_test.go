package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// cuttableProxy forwards TCP connections from a loopback port to target
// until cut, which closes the port and every connection through it; mend
// opens the same port again.
type cuttableProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	p := &cuttableProxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *cuttableProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *cuttableProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cuttableProxy) mend() {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.serve(ln)
}

// TestDatabaseOutageIs503: while the server's PostgreSQL cannot be reached
// (its connections cut and refused by a proxy in between), calls that need
// it are answered 503 with Retry-After and a message naming the database,
// anonymous or not, and the server serves again once it is back.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	u, err := url.Parse(db)
	require.NoError(t, err)
	proxy := newCuttableProxy(t, u.Host)
	u.Host = proxy.addr
	r := start(t, server.Config{DB: u.String()})
	ctx := context.Background()
	taskID := tcclient.NewTaskID()
	_, err = r.client.CreateTask(ctx, taskID, newTask("outage/q"))
	require.NoError(t, err)

	proxy.cut()
	calls := []struct {
		name string
		do   func() error
	}{
		{"status (anonymous)", func() error {
			_, err := (&tcclient.Client{RootURL: r.rootURL}).Status(ctx, taskID)
			return err
		}},
		{"createTask", func() error {
			_, err := r.client.CreateTask(ctx, tcclient.NewTaskID(), newTask("outage/q"))
			return err
		}},
		{"listClients", func() error { _, err := r.client.ListClients(ctx, "", tcclient.ListOptions{}); return err }},
	}
	for _, call := range calls {
		raw := rawGet(t, r.rootURL+"/api/queue/v1/task/"+taskID+"/status")
		require.Equal(t, http.StatusServiceUnavailable, raw.status, call.name+": %s", raw.body)
		require.Equal(t, "5", raw.retryAfter)
		var body struct{ Code, Message string }
		require.NoError(t, json.Unmarshal([]byte(raw.body), &body))
		require.Equal(t, "ServiceUnavailable", body.Code)
		require.Contains(t, body.Message, "cannot reach its database (PostgreSQL)")

		err := call.do()
		var apiErr *tcclient.APIError
		require.ErrorAs(t, err, &apiErr, call.name)
		require.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode, call.name)
	}

	proxy.mend()
	require.Eventually(t, func() bool {
		_, err := r.client.Status(ctx, taskID)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the server serves again once its database is back")
}

type rawReply struct {
	status     int
	retryAfter string
	body       string
}

func rawGet(t *testing.T, u string) rawReply {
	t.Helper()
	res, err := http.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return rawReply{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), body: string(b)}
}
