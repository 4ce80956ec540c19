package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// hostileBody is just under 10 MB of JSON: an object whose one array
// holds some 1.1 million small objects.
func hostileBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"taskQueueId":"x/y","payload":[`)
	for b.Len() < 10<<20-16 {
		b.WriteString(`{"a":1},`)
	}
	b.WriteString(`{"a":1}]}`)
	return b.Bytes()
}

// rssKiB reads a process's resident set size.
func rssKiB(t testing.TB, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read the server's memory from: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// hostileBodiesAtOnce sends n hostile bodies anonymously to createTask at
// once and returns each answer (status, body) and the server's peak RSS
// (sampled every 5 ms) above its RSS before.
func hostileBodiesAtOnce(t testing.TB, srv *e2e.Server, n int) (answers []string, idleKiB, peakKiB int) {
	body := hostileBody()
	idleKiB = rssKiB(t, srv.PID())
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := int64(rssKiB(t, srv.PID())); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				// A last sample, taken after every answer.
				if r := int64(rssKiB(t, srv.PID())); r > peak.Load() {
					peak.Store(r)
				}
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPut, srv.RootURL+"/api/queue/v1/task/"+tcclient.NewTaskID(), bytes.NewReader(body))
			if err != nil {
				panic(err)
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			answer := ""
			if err != nil {
				answer = "error: " + err.Error()
			} else {
				reply, _ := io.ReadAll(res.Body)
				res.Body.Close()
				answer = strconv.Itoa(res.StatusCode) + " " + string(reply)
			}
			mu.Lock()
			answers = append(answers, answer)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	return answers, idleKiB, int(peak.Load())
}

// TestHostileBodiesAreRefusedCheaply: eight anonymous createTask bodies of
// 10 MB and 1.1 million small objects each, sent at once, are answered
// 413 InputTooLarge in Taskcluster's error body, and the server's memory
// stays where it idles, give or take tens of MiB (it went from 32 MB to
// 4.2 GB when each body was decoded before anything else).
func TestHostileBodiesAreRefusedCheaply(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	answers, idle, peak := hostileBodiesAtOnce(t, srv, 8)
	t.Logf("server RSS: %d MiB idle, %d MiB at most while answering 8 hostile bodies", idle>>10, peak>>10)
	require.Len(t, answers, 8)
	for _, a := range answers {
		status, body, _ := strings.Cut(a, " ")
		require.Equal(t, "413", status, a)
		var e struct {
			Code        string `json:"code"`
			Message     string `json:"message"`
			RequestInfo struct {
				Method string `json:"method"`
			} `json:"requestInfo"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &e), body)
		require.Equal(t, "InputTooLarge", e.Code)
		require.Equal(t, "createTask", e.RequestInfo.Method)
		require.Contains(t, e.Message, "JSON values")
	}
	require.Less(t, peak-idle, 64<<10, "the server's RSS rose from %d to %d MiB", idle>>10, peak>>10)
}

// BenchmarkHostileBodies reports the server's RSS idle and at its peak
// while it answers 8 hostile bodies at once (MiB, per round).
func BenchmarkHostileBodies(b *testing.B) {
	srv := e2e.StartServer(b, e2e.ServerOptions{})
	var idle, peak int
	for b.Loop() {
		_, i, p := hostileBodiesAtOnce(b, srv, 8)
		idle, peak = i, max(peak, p)
	}
	b.ReportMetric(float64(idle)/1024, "idle-MiB")
	b.ReportMetric(float64(peak)/1024, "peak-MiB")
}

// TestSmallBodiesAreBoundedByTheirSchemas: a method whose request schema
// bounds its bodies small, or that takes none, answers an anonymous 10 MB
// body 413 InputTooLarge from its declared length, before any of it is
// sent; createTask, whose payload is free-form, reads that much.
func TestSmallBodiesAreBoundedByTheirSchemas(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	u, err := url.Parse(srv.RootURL)
	require.NoError(t, err)
	taskID := tcclient.NewTaskID()
	for _, tt := range []struct{ method, path, name string }{
		{"POST", "/api/queue/v1/claim-work/p/w", "claimWork"},
		{"POST", "/api/queue/v1/task/" + taskID + "/runs/0/exception", "reportException"},
		{"POST", "/api/queue/v1/task/" + taskID + "/runs/0/completed", "reportCompleted"},
		{"POST", "/api/queue/v1/task/" + taskID + "/cancel", "cancelTask"},
		{"PUT", "/api/queue/v1/task/" + taskID + "/runs/0/artifacts/public/x", "finishArtifact"},
	} {
		conn, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		// Were the body read, the answer would wait for it: fail, not hang.
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			tt.method, tt.path, u.Host, 10<<20-1)
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, tt.name)
		var e struct {
			Code        string `json:"code"`
			RequestInfo struct {
				Method string `json:"method"`
			} `json:"requestInfo"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&e), tt.name)
		conn.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, tt.name)
		require.Equal(t, "InputTooLarge", e.Code, tt.name)
		require.Equal(t, tt.name, e.RequestInfo.Method)
	}
}
