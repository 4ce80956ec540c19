package sandbox

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPeerUID(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			host := "127.0.0.1"
			if network == "tcp6" {
				host = "::1"
			}
			ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
			if err != nil {
				t.Skipf("no %s loopback here: %v", network, err)
			}
			defer ln.Close()
			client, err := net.Dial(network, ln.Addr().String())
			require.NoError(t, err)
			defer client.Close()
			server, err := ln.Accept()
			require.NoError(t, err)
			defer server.Close()
			uid, err := PeerUID(server.LocalAddr(), server.RemoteAddr())
			require.NoError(t, err)
			require.Equal(t, os.Geteuid(), uid)
		})
	}
}
