package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// openStreams opens n live-event streams of the whole feed, each read to
// the end by a goroutine, and returns when all are subscribed.
func openStreams(b *testing.B, rootURL string, n int) {
	u, err := url.Parse(rootURL)
	require.NoError(b, err)
	var wg sync.WaitGroup
	for range n {
		conn, err := net.Dial("tcp", u.Host)
		require.NoError(b, err)
		b.Cleanup(func() { conn.Close() })
		_, err = fmt.Fprintf(conn, "GET /api/live/v1/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", u.Host)
		require.NoError(b, err)
		wg.Add(1)
		go func() {
			r := bufio.NewReader(conn)
			status, err := r.ReadString('\n')
			if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200 ") {
				// Refused (a 503, say): the connection stays open, so
				// waiting for the subscription would never end.
				b.Errorf("opening a live stream: %q %v", status, err)
				wg.Done()
				return
			}
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					wg.Done()
					return
				}
				if strings.HasPrefix(line, ": subscribed") {
					wg.Done()
					_, _ = io.Copy(io.Discard, r)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkCreateTaskWithLiveSubscribers: task creation (SQLite, a real
// server on loopback) with 0 and 2,000 live-event streams open, each stream
// taking every event and read to the end by a goroutine of the benchmark.
// "saturated": 8 callers create tasks as fast as they can (tasks/s, what
// the fan-out costs the queue at full load); "20/s": tasks are created at
// 20 a second, the rate at which 2,000 streams once halved creation
// (tasks/s reached and the calls' latency).
//
//	go test ./internal/server -run '^$' -bench CreateTaskWithLiveSubscribers -benchtime 400x
func BenchmarkCreateTaskWithLiveSubscribers(b *testing.B) {
	for _, subs := range []int{0, 2000} {
		for _, load := range []struct {
			name    string
			callers int
			every   time.Duration
		}{{"saturated", 8, 0}, {"20/s", 8, 50 * time.Millisecond}} {
			b.Run(fmt.Sprintf("subscribers=%d/%s", subs, load.name), func(b *testing.B) {
				benchLiveCreate(b, subs, load.callers, load.every)
			})
		}
	}
}

func benchLiveCreate(b *testing.B, subs, callers int, every time.Duration) {
	cfg := server.Config{DataDir: b.TempDir(), Listen: "127.0.0.1:0", RootAccessToken: testRootToken}
	ready := make(chan string, 1)
	cfg.Ready = func(u string) { ready <- u }
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg) }()
	rootURL := <-ready
	defer func() { cancel(); <-done }()
	openStreams(b, rootURL, subs)
	client := &tcclient.Client{RootURL: rootURL, Credentials: &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: testRootToken},
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	work := make(chan struct{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		took []time.Duration
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				start := time.Now()
				if _, err := client.CreateTask(ctx, tcclient.NewTaskID(), newTask("bench/live")); err != nil {
					b.Error(err)
				}
				mu.Lock()
				took = append(took, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if tick != nil {
			<-tick
		}
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	b.ReportMetric(float64(len(took))/time.Since(start).Seconds(), "tasks/s")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}
