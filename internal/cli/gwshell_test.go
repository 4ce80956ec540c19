package cli

import (
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/interactive"
)

// TestShellProtocolFrames: hopper's relay takes the terminal's bytes as
// they are and sizes as JSON text; generic-worker's takes a type byte
// (1 input, 2 size) and the size as little-endian uint16 columns, rows.
func TestShellProtocolFrames(t *testing.T) {
	for _, tc := range []struct {
		name       string
		proto      shellProtocol
		input      []byte
		resizeType websocket.MessageType
		resize     []byte
	}{
		{"hopper", shellProtocol{}, []byte("ls\n"), websocket.MessageText, interactive.Control{Resize: &interactive.Size{Cols: 300, Rows: 40}}.Encode()},
		{"generic-worker", shellProtocol{genericWorker: true}, []byte("\x01ls\n"), websocket.MessageBinary, []byte{2, 0x2c, 0x01, 40, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.input, tc.proto.input([]byte("ls\n")))
			typ, msg := tc.proto.resize(300, 40)
			require.Equal(t, tc.resizeType, typ)
			require.Equal(t, tc.resize, msg)
		})
	}
}
