package cli

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/hopper-ci/hopper/internal/interactive"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// genericWorkerShellArtifact is where Taskcluster's generic-worker
// publishes an interactive run's shell: a reference to the console's
// /shell/ page whose socketUrl query names the worker's shell WebSocket,
// reached through a websocktunnel (hopper's own at <root>/websocktunnel).
const genericWorkerShellArtifact = "private/generic-worker/shell.html"

// generic-worker's interactive protocol: every message is binary; the
// viewer's first byte says what the rest is.
const (
	gwMsgStdin  = 1
	gwMsgResize = 2
)

// shellProtocol is how one kind of worker's shell WebSocket frames the
// terminal: hopper's relay (binary bytes both ways, JSON controls as text)
// or generic-worker's (a type byte before the viewer's input and sizes).
type shellProtocol struct {
	genericWorker bool
}

// input frames the terminal's bytes (a binary message in both).
func (p shellProtocol) input(b []byte) []byte {
	if !p.genericWorker {
		return b
	}
	return append([]byte{gwMsgStdin}, b...)
}

func (p shellProtocol) resize(cols, rows int) (websocket.MessageType, []byte) {
	if !p.genericWorker {
		return websocket.MessageText, interactive.Control{Resize: &interactive.Size{Cols: cols, Rows: rows}}.Encode()
	}
	msg := []byte{gwMsgResize, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(msg[1:3], uint16(min(max(cols, 0), 0xffff)))
	binary.LittleEndian.PutUint16(msg[3:5], uint16(min(max(rows, 0), 0xffff)))
	return websocket.MessageBinary, msg
}

// ended reports how a generic-worker shell's connection ending ends the
// command: generic-worker sends no exit code, it closes the connection
// when the shell exits.
func (p shellProtocol) ended(err error) error {
	if websocket.CloseStatus(err) == websocket.StatusNormalClosure || websocket.CloseStatus(err) == -1 && strings.Contains(err.Error(), "EOF") {
		return nil
	}
	return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("the shell's connection ended: %v", err), Err: err}
}

// openGenericWorkerShell opens the shell of a running task whose worker is
// Taskcluster's generic-worker, as Taskcluster's console does: from the
// socketUrl of the run's private/generic-worker/shell.html (reading it
// takes queue:get-artifact:private/generic-worker/shell.html; the URL's
// secret is the key to the shell). found is false when the run has no
// such artifact (not generic-worker, or not yet published).
func (a *app) openGenericWorkerShell(ctx context.Context, taskID string) (conn *websocket.Conn, found bool, err error) {
	art, err := a.client.GetLatestArtifact(ctx, taskID, genericWorkerShellArtifact)
	if tcclient.StatusCode(err) == 404 {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, failure("reading "+genericWorkerShellArtifact+" of task "+taskID, err)
	}
	page, err := url.Parse(art.URL)
	if err != nil {
		return nil, true, fmt.Errorf("task %s: %s is not a URL: %w", taskID, genericWorkerShellArtifact, err)
	}
	socket, err := url.Parse(page.Query().Get("socketUrl"))
	if err != nil || socket.Scheme != "ws" && socket.Scheme != "wss" {
		return nil, true, &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("task %s: %s names no ws:// or wss:// socketUrl", taskID, genericWorkerShellArtifact)}
	}
	conn, _, err = websocket.Dial(ctx, socket.String(), &websocket.DialOptions{HTTPClient: a.client.HTTPClient})
	if err != nil {
		// The query holds the shell's secret: never print it.
		socket.RawQuery, socket.Path = "", "/…"
		return nil, true, failure(fmt.Sprintf("opening generic-worker's shell of task %s at %s", taskID, socket.Redacted()), err)
	}
	return conn, true, nil
}
