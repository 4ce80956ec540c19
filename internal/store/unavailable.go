package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Unavailable reports whether err says the database could not be reached
// or dropped the connection (rather than refusing a statement), and names
// the database: a call failing so may succeed once it is back, so it is
// answered 503 with Retry-After, not 500. Only a network database fails
// this way, so a network error names PostgreSQL. Drivers' errors are
// recognised by what they wrap (net and syscall errors, the SQLSTATE
// classes of a lost connection), so this package needs no driver.
func Unavailable(err error) (database string, ok bool) {
	if err == nil {
		return "", false
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		code := state.SQLState()
		switch {
		case strings.HasPrefix(code, "08"), // connection exception
			code == "57P01", code == "57P02", code == "57P03", // admin/crash shutdown, cannot connect now
			code == "53300": // too many connections
			return "PostgreSQL", true
		}
		return "", false
	}
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr), errors.As(err, &netErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "PostgreSQL", true
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "PostgreSQL", true
	case errors.Is(err, driver.ErrBadConn):
		return "the database", true
	}
	// pgx's words for a connection that is gone, wrapped without a type.
	msg := err.Error()
	for _, gone := range []string{"conn closed", "failed to connect to", "connection reset by peer", "unexpected EOF", "broken pipe"} {
		if strings.Contains(msg, gone) {
			return "PostgreSQL", true
		}
	}
	return "", false
}
