package api

import (
	"bytes"
	"errors"
	"net"
	"sync"
)

// parkingListener is the server's listener with one addition: the
// connection of a parked claimWork call, once answered, comes back through
// Accept, so the HTTP server reads the client's next request on it as on a
// new connection. The client sees one kept-alive connection throughout.
type parkingListener struct {
	net.Listener
	accepted  chan acceptResult
	back      chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

type acceptResult struct {
	conn net.Conn
	err  error
}

// Listener wraps the listener the HTTP server serves s on, so that
// claimWork calls waiting on an empty task queue park: they give up their
// goroutine and buffers and keep only the connection (park.go). Without
// it (a Handler mounted elsewhere) a waiting call blocks in its handler.
func (s *Server) Listener(ln net.Listener) net.Listener {
	l := &parkingListener{Listener: ln, accepted: make(chan acceptResult), back: make(chan net.Conn, 64), closed: make(chan struct{})}
	go l.acceptLoop()
	s.parking = l
	return l
}

func (l *parkingListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		select {
		case l.accepted <- acceptResult{c, err}:
		case <-l.closed:
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		// Other errors (too many open files) pass on to the HTTP server,
		// which backs off and accepts again.
	}
}

// Accept returns the next new or handed-back connection.
func (l *parkingListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.back:
		return c, nil
	case r := <-l.accepted:
		return r.conn, r.err
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections handed back and not yet accepted,
// or handed back afterwards, are closed.
func (l *parkingListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	err := l.Listener.Close()
	for {
		select {
		case c := <-l.back:
			_ = c.Close()
		default:
			return err
		}
	}
}

// handBack returns an answered connection to the HTTP server.
func (l *parkingListener) handBack(c net.Conn) {
	select {
	case <-l.closed:
		_ = c.Close()
		return
	default:
	}
	select {
	case l.back <- c:
	case <-l.closed:
		_ = c.Close()
	}
}

// prefixedConn is a connection some of whose bytes were read ahead (a
// request the client sent before the parked call was answered).
type prefixedConn struct {
	net.Conn
	prefix *bytes.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) {
	if c.prefix.Len() > 0 {
		return c.prefix.Read(p)
	}
	return c.Conn.Read(p)
}
