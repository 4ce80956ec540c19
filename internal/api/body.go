package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/schema"
)

// What a request body may cost. Anyone may send one (anonymous callers
// included), and a JSON body's cost is not its size: 10 MB of "{}," is a
// million objects, and decoding them took half a gigabyte. So a body is
// read in pieces, each scanned as it arrives (bodyScan: values and
// nesting, no decoding), and refused as soon as it passes its route's
// limits; the bytes read are reserved from one budget shared by all calls,
// and a body that passed is charged for the values it holds while it is
// decoded and validated, so concurrent bodies together stay within
// bodyBudgetBytes. A call whose route needs credentials and that sends a
// large body is authenticated before its body is read (handle).

// BodyLimits bound one route's request bodies.
type BodyLimits struct {
	// MaxBytes is the largest body (Taskcluster's 10 MB).
	MaxBytes int64
	// MaxValues bounds the JSON values (objects, arrays, strings,
	// numbers, literals; object keys count as strings) a body holds.
	MaxValues int
	// MaxDepth bounds the nesting of objects and arrays.
	MaxDepth int
}

// DefaultBodyLimits are the most any route takes: room for a task with
// 10,000 dependencies, routes and a large payload, far below what decoding
// can afford. A route whose schema leaves its bodies open gets them.
var DefaultBodyLimits = BodyLimits{MaxBytes: maxBodyBytes, MaxValues: 200_000, MaxDepth: 100}

// NoBodyLimits are the limits of a route without a request schema, which
// takes no body (reportCompleted reads a legacy flag from one, if sent).
var NoBodyLimits = BodyLimits{MaxBytes: minBodyBytes, MaxValues: minBodyValues, MaxDepth: minBodyDepth}

// The least limits a route's schema can set: a body a little off its
// schema (a property too many, a string too long) is answered by the
// schema's own 400 naming the problem, not 413, and costs little.
const (
	minBodyBytes  = 64 << 10
	minBodyValues = 1000
	minBodyDepth  = 16
)

// bodyLimitsFor derives a route's limits from its request schema: what the
// largest body valid against it holds (schema.Bounds) with room for its
// whitespace (a line a value, indented 8 spaces a level), never below the
// minimums and never above DefaultBodyLimits. A route whose schema bounds
// its bodies refuses a larger one with 413 before reading it (by its
// declared length) or as soon as it passes the limit.
func (s *Server) bodyLimitsFor(input string) BodyLimits {
	b, err := s.schemas.Bounds(input)
	if err != nil {
		return DefaultBodyLimits // the call answers the unknown schema
	}
	limits := DefaultBodyLimits
	limits.MaxDepth = int(clampLimit(b.Depth, minBodyDepth, int64(limits.MaxDepth)))
	limits.MaxValues = int(clampLimit(b.Values, minBodyValues, int64(limits.MaxValues)))
	if b.Bytes != schema.Unbounded && b.Values != schema.Unbounded && b.Depth != schema.Unbounded {
		whitespace := b.Values * (8*b.Depth + 4)
		limits.MaxBytes = clampLimit(b.Bytes+whitespace, minBodyBytes, limits.MaxBytes)
	}
	return limits
}

// clampLimit is n within [least, most] (schema.Unbounded: most).
func clampLimit(n, least, most int64) int64 {
	return min(max(n, least), most)
}

const (
	// bodyBudgetBytes is what the bodies of all calls in flight may cost
	// together: their bytes while read, and bytesPerValue for each value
	// while decoded and validated.
	bodyBudgetBytes = 96 << 20
	// bytesPerValue is what decoding a JSON value into Go (any) costs at
	// most, measured on small objects (`{}` in an array: a map, its
	// header and the interface, some 100-400 bytes).
	bytesPerValue = 400
	// bodyChunk is how much of a body is reserved and read at a time.
	bodyChunk = 64 << 10
	// bodyBudgetWait is how long a call waits for room in the budget
	// before it is answered 503.
	bodyBudgetWait = 10 * time.Second
)

// bodyBudget is a counting semaphore over bytes. Calls reserve as they
// read and never wait holding nothing back from a timed-out wait, so calls
// holding part of the budget cannot wait on each other forever.
type bodyBudget struct {
	mu      sync.Mutex
	free    int64
	changed chan struct{} // closed and replaced whenever room is freed
}

func newBodyBudget(n int64) *bodyBudget {
	return &bodyBudget{free: n, changed: make(chan struct{})}
}

var errBodyBudget = errors.New("request bodies in flight fill the server's budget")

// acquire reserves n bytes, waiting at most until deadline.
func (b *bodyBudget) acquire(ctx context.Context, n int64, deadline time.Time) error {
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		wait := b.changed
		b.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wait:
			t.Stop()
		case <-t.C:
			return errBodyBudget
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (b *bodyBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// bodyRefusal is a body refused for its cost.
type bodyRefusal struct{ err *Error }

func (r bodyRefusal) Error() string { return r.err.Message }

// readBody reads the call's body within its route's limits, reserving
// the bytes read from the budget. It returns the body and how much of the
// budget the call holds (to release when the call ends).
func (s *Server) readBody(c *Call) ([]byte, int64, error) {
	limits := DefaultBodyLimits
	if c.Route.BodyLimits != nil {
		limits = *c.Route.BodyLimits
	}
	if c.R.ContentLength > limits.MaxBytes {
		return nil, 0, bodyRefusal{Errorf(CodeInputTooLarge, "Request body is larger than %d bytes", limits.MaxBytes)}
	}
	if c.R.ContentLength == 0 || c.R.Body == nil || c.R.Body == http.NoBody {
		// No body: nothing is reserved. A call without one may last
		// (a live stream, a parked claim), and 1,536 streams each
		// holding a chunk once took the whole budget: every body was
		// then refused 503.
		return nil, 0, nil
	}
	var (
		held     int64
		body     []byte
		scan     schema.Scanner
		deadline = time.Now().Add(bodyBudgetWait)
	)
	src := c.R.Body
	for {
		if int64(len(body)) > limits.MaxBytes {
			return nil, held, bodyRefusal{Errorf(CodeInputTooLarge, "Request body is larger than %d bytes", limits.MaxBytes)}
		}
		if len(body) == cap(body) {
			// Grow by a chunk at a time (not by doubling), each chunk
			// reserved before it is filled; a body of declared length
			// reserves what it declared (and a byte to see its end),
			// not a whole chunk.
			step := int64(bodyChunk)
			if cl := c.R.ContentLength; cl > 0 && cl-int64(len(body))+1 < step {
				step = max(cl-int64(len(body))+1, 1)
			}
			if err := s.bodies.acquire(c.Context(), step, deadline); err != nil {
				return nil, held, err
			}
			held += step
			grown := make([]byte, len(body), int64(cap(body))+step)
			copy(grown, body)
			body = grown
		}
		n, err := src.Read(body[len(body):cap(body)])
		if n > 0 {
			scan.Feed(body[len(body) : len(body)+n])
			body = body[:len(body)+n]
			if scan.Values > limits.MaxValues {
				return nil, held, bodyRefusal{Errorf(CodeInputTooLarge,
					"Request body holds more than %d JSON values", limits.MaxValues)}
			}
			if scan.MaxDepth > limits.MaxDepth {
				return nil, held, bodyRefusal{Errorf(CodeMalformedPayload,
					"Request body nests objects and arrays more than %d deep", limits.MaxDepth)}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, held, fmt.Errorf("reading request body: %w", err)
		}
	}
	if int64(len(body)) > limits.MaxBytes {
		return nil, held, bodyRefusal{Errorf(CodeInputTooLarge, "Request body is larger than %d bytes", limits.MaxBytes)}
	}
	// Decoding and validating the values costs more than their bytes:
	// hold that too until the call ends.
	if cost := int64(scan.Values)*bytesPerValue - held; cost > 0 && c.Route.Input != "" {
		if err := s.bodies.acquire(c.Context(), cost, deadline); err != nil {
			return nil, held, err
		}
		held += cost
	}
	return body, held, nil
}

// bodyFailure maps readBody's errors onto the call's answer.
func bodyFailure(err error) *Error {
	var refused bodyRefusal
	switch {
	case errors.As(err, &refused):
		return refused.err
	case errors.Is(err, errBodyBudget):
		return &Error{Code: CodeServiceUnavailable, Message: "The server is busy reading other request bodies; retry shortly", RetryAfter: 1}
	default:
		return Errorf(CodeMalformedPayload, "Reading request body: %v", err)
	}
}

// largeBody is the size from which a body is read only after its
// caller's credentials (if any) were checked.
const largeBody = 64 << 10

// mustAuthenticateFirst reports whether the call's credentials are checked
// before its body is read: a route that needs scopes, a body that may be
// large (declared so, or of unknown length), and credentials sent. The
// Hawk MAC covers the payload's hash, not the payload, so it can be
// checked first; the hash is checked against the body once it is read.
// Smaller bodies keep Taskcluster's order of errors (a malformed body is
// answered before bad credentials).
func mustAuthenticateFirst(c *Call) bool {
	if c.Route.Scopes == "" || c.R.ContentLength >= 0 && c.R.ContentLength < largeBody {
		return false
	}
	return c.R.Header.Get("Authorization") != "" || c.R.URL.Query().Has("bewit")
}

// Preauthenticator is implemented by authorizers that can check a call's
// credentials before its body is read.
type Preauthenticator interface {
	Preauthenticate(c *Call) error
}
