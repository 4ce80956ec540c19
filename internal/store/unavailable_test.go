package store

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

type sqlStateError string

func (e sqlStateError) Error() string    { return "pg error " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

func TestUnavailable(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"refused dial", fmt.Errorf("loading task: %w", dial), true},
		{"reset", fmt.Errorf("x: %w", syscall.ECONNRESET), true},
		{"cut mid-reply", fmt.Errorf("x: %w", io.ErrUnexpectedEOF), true},
		{"bad conn", driver.ErrBadConn, true},
		{"admin shutdown", fmt.Errorf("x: %w", sqlStateError("57P01")), true},
		{"connection exception", sqlStateError("08006"), true},
		{"too many connections", sqlStateError("53300"), true},
		{"pgx's words", errors.New("failed to connect to `user=postgres database=x`: dial error"), true},
		{"a refused statement", sqlStateError("23505"), false},
		{"not found", ErrNotFound, false},
		{"anything else", errors.New("boom"), false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		_, got := Unavailable(tt.err)
		require.Equal(t, tt.want, got, tt.name)
	}
}
