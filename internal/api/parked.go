package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A call that has to wait long (the queue's claimWork on an empty task
// queue) can park instead of blocking in its handler: it takes the
// connection over from the HTTP server, which frees the connection's
// goroutines and buffers and the request's state, and keeps only what its
// reply, an error's reply and the access log need. When it has its answer,
// Reply writes it and hands the connection back to the HTTP server
// (parkingListener) for the client's next request.

// ParkedReply is what a handler returns when it parked its call (Park):
// the reply comes later, from elsewhere.
type ParkedReply struct{}

// statusParked is handle's status for a parked call: nothing to log yet.
const statusParked = -1

// ParkedCall is a parked call: a few hundred bytes besides the connection.
// Its owner serializes the calls of its methods.
type ParkedCall struct {
	srv   *Server
	route *Route
	// params are the call's URL parameters; a call with one keeps it as
	// param and value instead of a map.
	params     map[string]string
	param, val string
	input      []byte
	method     string
	path       string
	clientID   string
	now        time.Time
	started    time.Time

	conn   net.Conn
	raw    net.Conn    // the connection as it was taken over
	header http.Header // nil: the base headers (setBaseHeaders)
	close  bool        // the client asked to close the connection after the reply
}

// Park takes the call's connection over if it can: HTTP/1.x on a
// connection the server accepted through its parking listener (Listener).
// It returns false, leaving the call as it was, when it cannot. The
// handler then returns ParkedReply{}; started is when the call began, for
// the access log and metrics.
func (c *Call) Park(started time.Time) (ParkedCall, bool) {
	s := c.srv
	if s.parking == nil || c.R.ProtoMajor != 1 {
		return ParkedCall{}, false
	}
	var header http.Header
	if h := c.W.Header(); !hasOnlyBaseHeaders(h) {
		header = h.Clone()
	}
	conn, rw, err := http.NewResponseController(c.W).Hijack()
	if err != nil {
		return ParkedCall{}, false
	}
	if n := rw.Reader.Buffered(); n > 0 {
		// The client already sent its next request: keep it for the
		// server to read after the reply.
		ahead, _ := rw.Reader.Peek(n)
		conn = &prefixedConn{Conn: conn, prefix: bytes.NewReader(bytes.Clone(ahead))}
	}
	// Copies, not slices, of the request's strings and bytes: a slice
	// would keep the whole request (its header block, its body buffer)
	// alive for the wait.
	p := ParkedCall{srv: s, route: c.Route, input: bytes.Clone(c.Input), method: c.R.Method, path: strings.Clone(c.R.URL.Path),
		now: c.Now, started: started, conn: conn, raw: conn, header: header, close: c.R.Close || c.R.ProtoMinor == 0}
	if len(c.Params) == 1 {
		for k, v := range c.Params {
			p.param, p.val = strings.Clone(k), strings.Clone(v)
		}
	} else {
		p.params = c.Params
	}
	if k, ok := c.Auth.(knownClientID); ok {
		p.clientID = strings.Clone(k.KnownClientID())
	}
	return p, true
}

// StillThere looks at the connection as it was taken over without
// waiting: false only when the system says the client has gone.
func (p *ParkedCall) StillThere() bool {
	gone, known := peerGone(p.raw)
	return !known || !gone
}

// Alive reports whether the client is still there. Where the system
// allows, it looks without waiting (peerGone); otherwise it reads with a
// deadline of a moment: a closed connection reads EOF at once, an open
// one times out. (A deadline already past would time out before looking.)
func (p *ParkedCall) Alive() bool {
	c := p.conn
	pc, prefixed := c.(*prefixedConn)
	if prefixed {
		if pc.prefix.Len() > 0 {
			return true // the client sent its next request already
		}
		c = pc.Conn
	}
	if gone, known := peerGone(c); known {
		return !gone
	}
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err := c.Read(b[:])
	_ = c.SetReadDeadline(time.Time{})
	if n > 0 {
		// The start of a request sent before this reply: keep it.
		p.conn = &prefixedConn{Conn: c, prefix: bytes.NewReader([]byte{b[0]})}
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Gone closes the connection of a client that went away and logs the call.
func (p *ParkedCall) Gone() {
	_ = p.conn.Close()
	p.srv.logAccess(p.call(nil), statusClientClosedRequest, time.Since(p.started))
}

// Reply writes the reply (or the error's), records the call as served and
// hands the connection back.
func (p *ParkedCall) Reply(out any, err error) {
	header := p.header
	if header == nil {
		header = http.Header{}
		setBaseHeaders(header)
	}
	w := &rawResponse{header: header}
	c := p.call(w)
	status := http.StatusOK
	if err != nil {
		status = p.srv.fail(c, err)
	} else {
		WriteJSON(w, http.StatusOK, out)
	}
	took := time.Since(p.started)
	if p.srv.metrics != nil {
		p.srv.metrics.ObserveRequest(c.Route.Name, status, took)
	}
	p.srv.logAccess(c, status, took)
	if _, err := w.writeTo(p.conn, p.close); err != nil || p.close {
		_ = p.conn.Close()
		return
	}
	p.srv.parking.handBack(p.conn)
}

// call rebuilds the parts of the call that fail and logAccess use.
func (p *ParkedCall) call(w http.ResponseWriter) *Call {
	r := (&http.Request{Method: p.method, URL: &url.URL{Path: p.path}, ProtoMajor: 1, ProtoMinor: 1}).WithContext(context.Background())
	params := p.params
	if params == nil && p.param != "" {
		params = map[string]string{p.param: p.val}
	}
	return &Call{W: w, R: r, Route: p.route, Params: params, Input: p.input, Body: p.input, Now: p.now,
		Auth: knownClient(p.clientID), srv: p.srv}
}

// knownClient is a clientId already authenticated.
type knownClient string

func (k knownClient) KnownClientID() string { return string(k) }

// rawResponse is the ResponseWriter of a parked call's reply: it keeps the
// reply and writes it, with a Content-Length, straight to the connection.
type rawResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *rawResponse) Header() http.Header { return w.header }

func (w *rawResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *rawResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// writeTo writes the HTTP/1.1 response.
func (w *rawResponse) writeTo(conn net.Conn, closing bool) (int64, error) {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	h := w.header
	h.Set("Content-Length", strconv.Itoa(w.body.Len()))
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	if closing {
		h.Set("Connection", "close")
	}
	bw := bufio.NewWriterSize(conn, 512+w.body.Len())
	fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", status, http.StatusText(status))
	if err := h.Write(bw); err != nil {
		return 0, err
	}
	_, _ = bw.WriteString("\r\n")
	_, _ = bw.Write(w.body.Bytes())
	_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	defer conn.SetWriteDeadline(time.Time{})
	return int64(bw.Buffered()), bw.Flush()
}
