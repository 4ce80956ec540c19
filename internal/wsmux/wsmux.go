// Package wsmux speaks the stream multiplexing of Taskcluster's
// websocktunnel over one WebSocket: many byte streams, each opened with a
// SYN, flow-controlled by ACKs that return credit, half-closed with a FIN.
// Each frame is one binary message: a type byte (0 data, 1 open, 2 ack,
// 3 close), the stream id (uint32, little-endian), then the payload (the
// data; for an ack the credit as a uint32). The side that accepted the
// WebSocket (the tunnel server) opens even ids, the other odd ones. It is
// written from the protocol's description; hopper serves its server side
// (internal/tunnel) and tests drive its client side.
package wsmux

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Frame types.
const (
	msgData  byte = 0
	msgOpen  byte = 1
	msgAck   byte = 2
	msgClose byte = 3
)

// Window is the credit a stream grants its peer: the most of its data
// buffered unread, which bounds what one stream holds. It is
// websocktunnel's: the side that accepts a stream starts with this much
// credit without being told (it assumes its peer's window is its own).
const Window = 4 << 20

// maxFrame bounds an incoming frame (a header and at most a window).
const maxFrame = 5 + Window

// keepAlive is how often a session pings its peer; a peer that does not
// answer within it ends the session.
const keepAlive = 20 * time.Second

// ErrClosed is returned once the session or the stream is closed.
var ErrClosed = errors.New("wsmux: closed")

// Session is the multiplexing over one WebSocket.
type Session struct {
	conn *websocket.Conn
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	streams map[uint32]*Stream
	next    uint32
	accepts chan *Stream
	err     error

	wmu sync.Mutex
}

// NewSession runs the multiplexing on conn; server says this side
// accepted the WebSocket. The session ends when conn does.
func NewSession(conn *websocket.Conn, server bool) *Session {
	ctx, stop := context.WithCancel(context.Background())
	s := &Session{conn: conn, ctx: ctx, stop: stop, streams: map[uint32]*Stream{}, accepts: make(chan *Stream, 64)}
	if !server {
		s.next = 1
	}
	conn.SetReadLimit(maxFrame)
	go s.readLoop()
	go s.pings()
	return s
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Close ends the session and every stream.
func (s *Session) Close() error {
	s.end(ErrClosed)
	return s.conn.Close(websocket.StatusNormalClosure, "")
}

func (s *Session) end(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	streams := s.streams
	s.streams = map[uint32]*Stream{}
	s.mu.Unlock()
	s.stop()
	for _, st := range streams {
		st.fail(err)
	}
}

func (s *Session) send(ctx context.Context, typ byte, id uint32, payload []byte) error {
	msg := make([]byte, 5+len(payload))
	msg[0] = typ
	binary.LittleEndian.PutUint32(msg[1:], id)
	copy(msg[5:], payload)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.conn.Write(ctx, websocket.MessageBinary, msg); err != nil {
		s.end(err)
		return err
	}
	return nil
}

func ackPayload(n uint32) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, n)
	return b
}

func (s *Session) pings() {
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, keepAlive)
		err := s.conn.Ping(ctx)
		cancel()
		if err != nil {
			s.end(fmt.Errorf("wsmux: the peer stopped answering pings: %w", err))
			_ = s.conn.CloseNow()
			return
		}
	}
}

func (s *Session) readLoop() {
	defer close(s.accepts)
	for {
		typ, msg, err := s.conn.Read(s.ctx)
		if err != nil {
			s.end(err)
			return
		}
		if typ != websocket.MessageBinary || len(msg) < 5 {
			s.end(errors.New("wsmux: malformed frame"))
			_ = s.conn.Close(websocket.StatusPolicyViolation, "malformed frame")
			return
		}
		kind, id, payload := msg[0], binary.LittleEndian.Uint32(msg[1:5]), msg[5:]
		s.mu.Lock()
		st := s.streams[id]
		s.mu.Unlock()
		switch kind {
		case msgOpen:
			if st != nil || len(payload) != 0 {
				continue
			}
			st = newStream(s, id)
			s.mu.Lock()
			s.streams[id] = st
			s.mu.Unlock()
			select {
			case s.accepts <- st:
			default:
				// Too many streams waiting to be accepted.
				s.forget(id)
				_ = s.send(s.ctx, msgClose, id, nil)
			}
		case msgAck:
			if st != nil && len(payload) == 4 {
				st.credit(binary.LittleEndian.Uint32(payload))
			}
		case msgData:
			if st != nil && !st.push(payload) {
				s.end(errors.New("wsmux: the peer sent more than its credit"))
				_ = s.conn.Close(websocket.StatusPolicyViolation, "flow control violated")
				return
			}
		case msgClose:
			if st != nil {
				st.remoteClose()
			}
		default:
			s.end(errors.New("wsmux: unknown frame type"))
			_ = s.conn.Close(websocket.StatusPolicyViolation, "unknown frame type")
			return
		}
	}
}

func (s *Session) forget(id uint32) {
	s.mu.Lock()
	delete(s.streams, id)
	s.mu.Unlock()
}

// Open opens a stream to the peer and waits until it accepts it.
func (s *Session) Open(ctx context.Context) (*Stream, error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	for s.streams[s.next] != nil {
		s.next += 2
	}
	id := s.next
	s.next += 2
	st := newStream(s, id)
	s.streams[id] = st
	s.mu.Unlock()
	if err := s.send(ctx, msgOpen, id, nil); err != nil {
		return nil, err
	}
	select {
	case <-st.accepted:
		return st, nil
	case <-st.dead:
		return nil, st.err()
	case <-ctx.Done():
		s.forget(id)
		return nil, ctx.Err()
	}
}

// Accept waits for the peer to open a stream and accepts it.
func (s *Session) Accept(ctx context.Context) (*Stream, error) {
	select {
	case st, ok := <-s.accepts:
		if !ok {
			return nil, ErrClosed
		}
		close(st.accepted)
		st.mu.Lock()
		st.sendCredit += Window
		st.mu.Unlock()
		if err := s.send(ctx, msgAck, st.id, ackPayload(Window)); err != nil {
			return nil, err
		}
		return st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stream is one byte stream of a session: an io.ReadWriteCloser whose
// Close ends this side's writing (the peer reads EOF).
type Stream struct {
	s        *Session
	id       uint32
	accepted chan struct{}
	dead     chan struct{}

	mu         sync.Mutex
	cond       *sync.Cond
	buf        bytes.Buffer
	sendCredit uint32
	remoteDone bool
	localDone  bool
	failure    error
	acceptOnce sync.Once
	deadOnce   sync.Once
}

func newStream(s *Session, id uint32) *Stream {
	st := &Stream{s: s, id: id, accepted: make(chan struct{}), dead: make(chan struct{})}
	st.cond = sync.NewCond(&st.mu)
	return st
}

// credit adds what the peer's ack grants; the first ack of a stream this
// side opened accepts it.
func (st *Stream) credit(n uint32) {
	st.mu.Lock()
	st.sendCredit += n
	st.mu.Unlock()
	st.acceptOnce.Do(func() {
		select {
		case <-st.accepted:
		default:
			close(st.accepted)
		}
	})
	st.cond.Broadcast()
}

// push buffers data from the peer; false if it exceeds the credit given.
func (st *Stream) push(p []byte) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.buf.Len()+len(p) > Window {
		return false
	}
	st.buf.Write(p)
	st.cond.Broadcast()
	return true
}

func (st *Stream) remoteClose() {
	st.mu.Lock()
	st.remoteDone = true
	done := st.localDone
	st.mu.Unlock()
	st.cond.Broadcast()
	if done {
		st.s.forget(st.id)
	}
}

func (st *Stream) fail(err error) {
	st.mu.Lock()
	if st.failure == nil {
		st.failure = err
	}
	st.mu.Unlock()
	st.deadOnce.Do(func() { close(st.dead) })
	st.cond.Broadcast()
}

func (st *Stream) err() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.failure != nil {
		return st.failure
	}
	return ErrClosed
}

// Read reads what the peer wrote; io.EOF once it closed and all was read.
func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	for st.buf.Len() == 0 && !st.remoteDone && st.failure == nil {
		st.cond.Wait()
	}
	if st.buf.Len() == 0 {
		defer st.mu.Unlock()
		if st.remoteDone {
			return 0, io.EOF
		}
		return 0, st.failure
	}
	n, _ := st.buf.Read(p)
	st.mu.Unlock()
	// The credit goes back as the data is read: what the peer may send is
	// what this side has room for.
	if err := st.s.send(st.s.ctx, msgAck, st.id, ackPayload(uint32(n))); err != nil {
		return n, err
	}
	return n, nil
}

// Write sends p, waiting for credit as the peer reads.
func (st *Stream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		st.mu.Lock()
		for st.sendCredit == 0 && st.failure == nil && !st.localDone {
			st.cond.Wait()
		}
		if st.failure != nil || st.localDone {
			st.mu.Unlock()
			if st.failure != nil {
				return written, st.failure
			}
			return written, ErrClosed
		}
		n := min(uint32(len(p)), st.sendCredit, 32<<10)
		st.sendCredit -= n
		st.mu.Unlock()
		if err := st.s.send(st.s.ctx, msgData, st.id, p[:n]); err != nil {
			return written, err
		}
		p = p[n:]
		written += int(n)
	}
	return written, nil
}

// Close ends this side's writing; the stream is forgotten once both sides
// closed.
func (st *Stream) Close() error {
	st.mu.Lock()
	if st.localDone {
		st.mu.Unlock()
		return nil
	}
	st.localDone = true
	remote := st.remoteDone
	st.mu.Unlock()
	st.cond.Broadcast()
	if remote {
		st.s.forget(st.id)
	}
	return st.s.send(st.s.ctx, msgClose, st.id, nil)
}
