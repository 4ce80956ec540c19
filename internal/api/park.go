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
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/store"
)

// A claimWork call that finds its task queue empty parks instead of
// blocking in its handler: it takes the connection over from the HTTP
// server (which frees the connection's goroutines and buffers and the
// request's state) and waits with nothing but the connection, a hub
// subscription and its place in the server's list of parked calls, whose
// one timer ends the long-polls (parkedset.go). A wake-up, the end of the
// long-poll or a drain has a goroutine claim and write the reply, then hand
// the connection back to the HTTP server (parkingListener) for the
// client's next request. An idle fleet of ten thousand workers then costs
// a few kilobytes a worker instead of some forty.

// parkedReply is what a handler returns when it parked its call: the
// reply comes later, from elsewhere.
type parkedReply struct{}

// statusParked is handle's status for a parked call: nothing to log yet.
const statusParked = -1

// parkedClaim is one parked claimWork call. It keeps what the reply, an
// error's reply and the access log need of the call and no more: a few
// hundred bytes besides the connection.
type parkedClaim struct {
	s        *Server
	route    *Route
	params   map[string]string // nil: just taskQueueId, the claim's
	input    []byte
	method   string
	path     string
	clientID string
	now      time.Time

	conn     net.Conn
	header   http.Header // nil: the base headers (setBaseHeaders)
	close    bool        // the client asked to close the connection after the reply
	claim    store.ClaimWorkParams
	started  time.Time
	deadline time.Time

	// The place in Server.parked (-1: not parked), under its lock.
	index int

	mu      sync.Mutex
	done    bool
	waiting *store.Waiting
}

// parkClaim parks the call if it can: HTTP/1.x on a connection the server
// accepted through its parking listener. It returns false, leaving the
// call as it was, when it cannot. The parked call subscribes before it
// leaves the handler's subscription (handler, never armed), so that a
// wake-up the handler received meanwhile passes on rather than being lost.
func (s *Server) parkClaim(c *Call, p store.ClaimWorkParams, started, deadline time.Time, handler *store.Waiting) bool {
	if s.parking == nil || c.R.ProtoMajor != 1 {
		return false
	}
	var header http.Header
	if h := c.W.Header(); !hasOnlyBaseHeaders(h) {
		header = h.Clone()
	}
	conn, rw, err := http.NewResponseController(c.W).Hijack()
	if err != nil {
		return false
	}
	if n := rw.Reader.Buffered(); n > 0 {
		// The client already sent its next request: keep it for the
		// server to read after the reply.
		ahead, _ := rw.Reader.Peek(n)
		conn = &prefixedConn{Conn: conn, prefix: bytes.NewReader(bytes.Clone(ahead))}
	}
	// Copies, not slices, of the request's strings and bytes: a slice
	// would keep the whole request (its header block, its body buffer)
	// alive for the long-poll.
	pc := &parkedClaim{s: s, route: c.Route, input: bytes.Clone(c.Input), method: c.R.Method, path: strings.Clone(c.R.URL.Path),
		now: c.Now, conn: conn, header: header, claim: p, started: started, deadline: deadline, close: c.R.Close || c.R.ProtoMinor == 0,
		index: -1}
	if len(c.Params) != 1 || c.Params["taskQueueId"] != p.TaskQueueID {
		pc.params = c.Params
	}
	if k, ok := c.Auth.(knownClientID); ok {
		pc.clientID = strings.Clone(k.KnownClientID())
	}
	// A create may claim for the call while the worker is still there:
	// a look at the socket that does not wait (the connection as it was
	// taken over; pc.conn is the woken call's).
	raw := conn
	claimant := &store.Claimant{WorkerGroup: p.WorkerGroup, WorkerID: p.WorkerID, ClaimTimeout: s.cfg.ClaimTimeout,
		Alive: func() bool {
			gone, known := peerGone(raw)
			return !known || !gone
		}}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.waiting = s.store.WaitForWork(p.TaskQueueID, p.Count, claimant, pc.woken)
	handler.Leave()
	if !s.parked.add(pc) { // draining
		pc.finishLocked(emptyClaim{}, nil)
		return true
	}
	pc.waiting.Arm()
	return true
}

// woken runs when the hub wakes the parked call: it claims, and answers if
// it got work; otherwise it stays parked.
func (pc *parkedClaim) woken() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.done {
		return
	}
	if !pc.alive() {
		// The worker went away: leaving hands the wake-up to another.
		pc.done = true
		pc.leave()
		pc.s.parked.remove(pc)
		_ = pc.conn.Close()
		pc.s.logAccess(pc.call(nil), 499, time.Since(pc.started))
		return
	}
	select {
	case <-pc.waiting.C:
	default:
		return // taken already
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := pc.s.clock.Now()
	p := pc.claim
	res := pc.waiting.Claimed() // runs a create claimed for the call
	if res == nil {
		p.Now, p.TakenUntil, p.Woken = now, pc.s.takenUntil(now), true
		var err error
		if res, err = pc.s.store.ClaimWork(ctx, p); err != nil {
			pc.finishLocked(nil, err)
			return
		}
	}
	switch {
	case !res.QuarantinedUntil.IsZero():
		// Quarantined meanwhile: wait out the long-poll, out of the hub.
		pc.leave()
	case len(res.Claims) > 0:
		pc.s.recordRecentTasks(pc.workerKey(), res)
		out, err := pc.s.claimReply(ctx, res, now)
		pc.finishLocked(out, err)
	default:
		pc.waiting.Arm() // still waiting
	}
}

func (pc *parkedClaim) workerKey() store.WorkerKey {
	return store.WorkerKey{TaskQueueID: pc.claim.TaskQueueID, WorkerGroup: pc.claim.WorkerGroup, WorkerID: pc.claim.WorkerID}
}

// leave ends the call's wait in the hub and returns runs claimed for it
// that it has not answered with (see Waiting.Leave).
func (pc *parkedClaim) leave() *store.ClaimResult {
	res := pc.waiting.Leave()
	if res != nil && pc.done {
		pc.s.lostClaims(pc.workerKey(), res)
		return nil
	}
	return res
}

// alive reports whether the client is still there. Where the system
// allows, it looks without waiting (peerGone); otherwise it reads with a
// deadline of a moment: a closed connection reads EOF at once, an open
// one times out. (A deadline already past would time out before looking.)
func (pc *parkedClaim) alive() bool {
	c := pc.conn
	p, prefixed := c.(*prefixedConn)
	if prefixed {
		if p.prefix.Len() > 0 {
			return true // the client sent its next request already
		}
		c = p.Conn
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
		pc.conn = &prefixedConn{Conn: c, prefix: bytes.NewReader([]byte{b[0]})}
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (pc *parkedClaim) finish(out any, err error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.finishLocked(out, err)
}

// finishLocked writes the reply (or the error's), hands the connection
// back and records the call as served.
func (pc *parkedClaim) finishLocked(out any, err error) {
	if pc.done {
		return
	}
	if res := pc.leave(); res != nil {
		// Runs claimed for the call as its wait ended are its answer.
		if _, empty := out.(emptyClaim); empty && err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pc.s.recordRecentTasks(pc.workerKey(), res)
			out, err = pc.s.claimReply(ctx, res, pc.s.clock.Now())
		} else {
			pc.s.lostClaims(pc.workerKey(), res)
		}
	}
	pc.done = true
	pc.s.parked.remove(pc)
	header := pc.header
	if header == nil {
		header = http.Header{}
		setBaseHeaders(header)
	}
	w := &rawResponse{header: header}
	c := pc.call(w)
	status := http.StatusOK
	if err != nil {
		status = pc.s.fail(c, err)
	} else {
		writeJSON(w, http.StatusOK, out)
	}
	took := time.Since(pc.started)
	if pc.s.metrics != nil {
		pc.s.metrics.ObserveRequest(c.Route.Name, status, took)
	}
	pc.s.logAccess(c, status, took)
	if _, err := w.writeTo(pc.conn, pc.close); err != nil || pc.close {
		_ = pc.conn.Close()
		return
	}
	pc.s.parking.handBack(pc.conn)
}

// call rebuilds the parts of the call that fail and logAccess use.
func (pc *parkedClaim) call(w http.ResponseWriter) *Call {
	r := (&http.Request{Method: pc.method, URL: &url.URL{Path: pc.path}, ProtoMajor: 1, ProtoMinor: 1}).WithContext(context.Background())
	params := pc.params
	if params == nil {
		params = map[string]string{"taskQueueId": pc.claim.TaskQueueID}
	}
	return &Call{W: w, R: r, Route: pc.route, Params: params, Input: pc.input, Body: pc.input, Now: pc.now,
		Auth: knownClient(pc.clientID), srv: pc.s}
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
