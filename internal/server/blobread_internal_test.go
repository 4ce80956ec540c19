package server

import (
	"bytes"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// TestHeadAndTail: an artifact of at most 2*keep bytes comes whole; a
// longer one as its first and last keep bytes, whatever the reads' sizes.
func TestHeadAndTail(t *testing.T) {
	data := make([]byte, 300000)
	for i := range data {
		data[i] = byte(i % 251)
	}
	for _, tc := range []struct {
		name     string
		size     int
		keep     int
		wantTail bool
	}{
		{"empty", 0, 10, false},
		{"short", 15, 10, false},
		{"exactly twice keep", 20, 10, false},
		{"one byte over", 21, 10, true},
		{"long", 300000, 1000, true},
		{"long, keep over a read", 300000, 100000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []func() *bytes.Reader{func() *bytes.Reader { return bytes.NewReader(data[:tc.size]) }} {
				for _, reader := range []interface{ Read([]byte) (int, error) }{r(), iotest.OneByteReader(r()), iotest.HalfReader(r())} {
					head, tail, err := headAndTail(reader, tc.keep)
					require.NoError(t, err)
					if !tc.wantTail {
						require.Nil(t, tail)
						require.Equal(t, data[:tc.size], head[:len(head):len(head)])
						continue
					}
					require.Equal(t, data[:tc.keep], head)
					require.Equal(t, data[tc.size-tc.keep:tc.size], tail)
				}
			}
		})
	}
}
