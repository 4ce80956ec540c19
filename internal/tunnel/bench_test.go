package tunnel_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tunnel"
	"github.com/hopper-ci/hopper/internal/wsmux"
)

// BenchmarkIdleTunnels registers 1,000 idle tunnel clients (workers
// waiting for viewers) and reports the heap each holds, then a request's
// round trip through one of them while all stay connected, and the
// goroutines each adds. The clients' ends live in this process too, so
// the per-tunnel figures bound the server's part from above.
func BenchmarkIdleTunnels(b *testing.B) {
	const clients = 1000
	srv := httptest.NewServer(nil)
	defer srv.Close()
	tun := tunnel.New(secret, srv.URL, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	defer tun.Close()
	mux := http.NewServeMux()
	mux.Handle(tunnel.Prefix, tun)
	mux.Handle(tunnel.Prefix+"/", tun)
	srv.Config.Handler = mux
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutinesBefore := runtime.NumGoroutine()
	sessions := make([]*wsmux.Session, 0, clients)
	for i := 0; i < clients; i++ {
		id := fmt.Sprintf("idle.w%d", i)
		s, _, err := register(b, srv.URL, id, token(id, time.Now()))
		require.NoError(b, err)
		sessions = append(sessions, s)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perTunnel := float64(after.HeapInuse-before.HeapInuse) / clients / 1024
	goroutinesPer := float64(runtime.NumGoroutine()-goroutinesBefore) / clients
	go func() {
		_ = http.Serve(listener{sessions[clients/2]}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}))
	}()
	client := &http.Client{}
	url := fmt.Sprintf("%s/websocktunnel/idle.w%d/x", srv.URL, clients/2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := client.Get(url)
		require.NoError(b, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		require.Equal(b, http.StatusOK, res.StatusCode)
	}
	b.StopTimer()
	// After ResetTimer, which forgets metrics reported before it.
	b.ReportMetric(perTunnel, "KiB/tunnel")
	b.ReportMetric(goroutinesPer, "goroutines/tunnel")
	for _, s := range sessions {
		_ = s.Close()
	}
}
