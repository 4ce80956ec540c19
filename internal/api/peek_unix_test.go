//go:build unix

package api

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPeerGone: the look at a parked connection tells an open one from a
// closed one at once, and leaves what the client sent to be read.
func TestPeerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	server, err := ln.Accept()
	require.NoError(t, err)
	defer server.Close()

	look := func() (gone bool) {
		t.Helper()
		start := time.Now()
		gone, known := peerGone(server)
		require.True(t, known)
		require.Less(t, time.Since(start), 100*time.Millisecond, "the look waited")
		return gone
	}
	require.False(t, look(), "open, nothing sent")

	_, err = client.Write([]byte("POST"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !look() }, time.Second, time.Millisecond)
	require.False(t, look(), "open, a request begun")
	got := make([]byte, 4)
	require.NoError(t, server.SetReadDeadline(time.Now().Add(time.Second)))
	_, err = io.ReadFull(server, got)
	require.NoError(t, err)
	require.Equal(t, "POST", string(got), "the look took nothing")

	require.NoError(t, client.Close())
	require.Eventually(t, look, time.Second, time.Millisecond, "a closed client is seen as gone")
}
