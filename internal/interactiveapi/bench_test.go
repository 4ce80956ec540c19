package interactiveapi_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/interactive"
)

// BenchmarkOpenShellMemory measures the heap an open shell holds: each
// iteration opens shells through the relay (8 per run, the most a run
// allows) to a worker that echoes, and the heap after a GC is divided by
// the shells open. The viewers and the fake workers live in this process
// too, so the figure bounds the server's part from above. It also reports
// a keystroke's round trip through the relay alone.
func BenchmarkOpenShellMemory(b *testing.B) {
	const runs = 25
	bd := setup(b)
	ctx := context.Background()
	var viewers []*websocket.Conn
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		viewers = viewers[:0]
		for r := 0; r < runs; r++ {
			queue := fmt.Sprintf("prov/bench%d", r)
			id := bd.createTask(b, queue, map[string]any{"features": map[string]any{"interactive": true}})
			runClient, claim := bd.claim(b, queue)
			fakeWorker(b, runClient, id, claim.RunID)
			for !bd.relay.Connected(id, claim.RunID) {
				time.Sleep(time.Millisecond)
			}
			for s := 0; s < interactive.MaxSessionsPerRun; s++ {
				v, err := bd.srv.Root.OpenShell(ctx, id)
				require.NoError(b, err)
				viewers = append(viewers, v)
			}
		}
	}
	b.StopTimer()
	// Every shell answers before the heap is read.
	start := time.Now()
	for _, v := range viewers {
		require.NoError(b, v.Write(ctx, websocket.MessageBinary, []byte("x")))
		_, msg, err := v.Read(ctx)
		require.NoError(b, err)
		require.Equal(b, "X", string(msg))
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(len(viewers)), "µs/keystroke")
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(len(viewers))/1024, "KiB/shell")
	for _, v := range viewers {
		_ = v.CloseNow()
	}
}
