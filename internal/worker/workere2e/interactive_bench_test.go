package workere2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkShellKeystrokeEcho measures a keystroke's round trip through
// an open shell: from the viewer's WebSocket write of one character to
// its echo coming back, through hopper's relay, the worker's WebSocket,
// the pseudo-terminal and bash in the strict sandbox; on one replica, and
// across two sharing PostgreSQL (the viewer on A, the worker's agent on
// B: one signed hop more).
func BenchmarkShellKeystrokeEcho(b *testing.B) {
	if shared == nil {
		b.Skip("needs the hopper binaries; not run with -short")
	}
	if reason := strictSandboxMissing(b); reason != "" {
		b.Skip(reason)
	}
	b.Run("one-replica", func(b *testing.B) { keystrokeEcho(b, shared, shared) })
	b.Run("two-replicas", func(b *testing.B) {
		rs := startReplicas(b, 2)
		keystrokeEcho(b, rs[0], rs[1])
	})
}

// keystrokeEcho types into a shell opened through viewer in a task whose
// worker works for worker.
func keystrokeEcho(b *testing.B, viewer, worker *env) {
	queue := uniqueQueue("shellbench")
	dir := reachableDir(b)
	launchWorker(b, dir, workerConfig(worker, queue, dir, workerOpts{id: "shellbench", tasks: 1, config: map[string]any{"isolation": "strict"}}))
	id := createTaskOn(b, worker, queue, map[string]any{"command": [][]string{{"true"}}, "features": map[string]bool{"interactive": true}, "maxRunTime": 60}, nil)
	ctx := context.Background()
	var conn *websocket.Conn
	for deadline := time.Now().Add(2 * time.Minute); ; {
		c, err := viewer.admin.OpenShell(ctx, id)
		if err == nil {
			conn = c
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no shell: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer func() {
		_ = conn.CloseNow()
		_, _ = viewer.admin.CancelTask(ctx, id)
	}()
	// Wait for the prompt, then clear the line after each keystroke.
	readUntil := func(want string) {
		var got strings.Builder
		for !strings.Contains(got.String(), want) {
			_, msg, err := conn.Read(ctx)
			if err != nil {
				b.Fatalf("reading the shell: %v (got %q)", err, got.String())
			}
			got.Write(msg)
		}
	}
	if err := conn.Write(ctx, websocket.MessageBinary, []byte("PS1='$ '; echo ready\n")); err != nil {
		b.Fatal(err)
	}
	readUntil("ready")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := fmt.Sprint(i % 10)
		if err := conn.Write(ctx, websocket.MessageBinary, []byte(key)); err != nil {
			b.Fatal(err)
		}
		readUntil(key)
		if i%50 == 49 {
			b.StopTimer()
			_ = conn.Write(ctx, websocket.MessageBinary, []byte{21}) // ^U: clear the line
			b.StartTimer()
		}
	}
}
