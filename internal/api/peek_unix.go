//go:build unix

package api

import (
	"errors"
	"net"
	"syscall"
)

// peerGone looks, without waiting and without taking a byte, whether the
// client closed its end of the connection. known is false when the
// connection cannot be looked at this way.
func peerGone(c net.Conn) (gone, known bool) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		// A TLS connection: look at the TCP connection under it (a
		// client's close_notify reads as data, its FIN as the end).
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var (
		b    [1]byte
		n    int
		rerr error
	)
	if err := raw.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // one look, never wait for readability
	}); err != nil {
		return true, true // closed on this side
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) || errors.Is(rerr, syscall.EINTR):
		return false, true // open, nothing sent
	case rerr != nil:
		return true, true // reset
	case n == 0:
		return true, true // the client closed: end of stream
	default:
		return false, true // the start of the client's next request
	}
}
