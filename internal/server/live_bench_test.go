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

// BenchmarkCreateTaskWithLiveSubscribers: tasks created per second by 8
// concurrent callers (SQLite) with 0 and 2,000 live-event streams open,
// each stream taking every event.
func BenchmarkCreateTaskWithLiveSubscribers(b *testing.B) {
	for _, subs := range []int{0, 2000} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
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
			const callers = 8
			work := make(chan struct{})
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						if _, err := client.CreateTask(ctx, tcclient.NewTaskID(), newTask("bench/live")); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}
