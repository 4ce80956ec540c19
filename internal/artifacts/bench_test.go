package artifacts

import (
	"flag"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchBlobSize sets the size of the blob moved by BenchmarkLocal*, e.g.
// go test -run x -bench Local -hopper.blobsize=$((256<<20)) ./internal/artifacts
var benchBlobSize = flag.Int64("hopper.blobsize", 1<<30, "bytes per blob in BenchmarkLocalUpload/Download")

// BenchmarkLocalUpload PUTs a streamed blob of -hopper.blobsize bytes
// through the local handler over loopback HTTP, reporting throughput and
// the peak heap seen during the run (which must not grow with the size).
func BenchmarkLocalUpload(b *testing.B) {
	bb := setupLocal(b, nil)
	size := *benchBlobSize
	key := "Bench/0/public/upload.bin"
	putURL, err := bb.local.PutURL(b.Context(), key, "application/octet-stream", bb.clock.Now().Add(time.Hour))
	require.NoError(b, err)
	client := testClient()
	defer client.CloseIdleConnections()

	b.SetBytes(size)
	peak := startPeakSampler(b)
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodPut, putURL, &patternReader{remaining: size})
		require.NoError(b, err)
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := client.Do(req)
		require.NoError(b, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
	}
	peak.report(b)

	info, err := bb.local.Stat(b.Context(), key)
	require.NoError(b, err)
	require.Equal(b, size, info.Size)
}

// BenchmarkLocalDownload GETs a stored blob of -hopper.blobsize bytes
// through the local handler over loopback HTTP.
func BenchmarkLocalDownload(b *testing.B) {
	bb := setupLocal(b, nil)
	size := *benchBlobSize
	key := "Bench/0/public/download.bin"
	_, err := bb.local.Put(b.Context(), key, "application/octet-stream", "", size, &patternReader{remaining: size})
	require.NoError(b, err)
	getURL, err := bb.local.GetURL(b.Context(), key, bb.clock.Now().Add(time.Hour))
	require.NoError(b, err)
	client := testClient()
	defer client.CloseIdleConnections()

	b.SetBytes(size)
	peak := startPeakSampler(b)
	for b.Loop() {
		resp, err := client.Get(getURL)
		require.NoError(b, err)
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		require.Equal(b, size, n)
		require.Equal(b, strconv.FormatInt(size, 10), resp.Header.Get("Content-Length"))
	}
	peak.report(b)
}

// patternReader streams remaining bytes of a repeating non-trivial pattern
// without holding them in memory.
type patternReader struct {
	remaining int64
	offset    int
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.remaining <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.remaining {
		p = p[:r.remaining]
	}
	for i := range p {
		p[i] = byte((r.offset + i) * 2654435761 >> 13)
	}
	r.offset += len(p)
	r.remaining -= int64(len(p))
	return len(p), nil
}

// peakSampler polls runtime.MemStats while a benchmark runs. It measures
// the whole process, client and server together, which is the honest
// upper bound for the server's share.
type peakSampler struct {
	stop     chan struct{}
	done     sync.WaitGroup
	heap     atomic.Uint64
	sys      atomic.Uint64
	baseHeap uint64
}

func startPeakSampler(b *testing.B) *peakSampler {
	b.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := &peakSampler{stop: make(chan struct{}), baseHeap: ms.HeapAlloc}
	s.done.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > s.heap.Load() {
				s.heap.Store(ms.HeapAlloc)
			}
			if ms.Sys > s.sys.Load() {
				s.sys.Store(ms.Sys)
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	})
	return s
}

func (s *peakSampler) report(b *testing.B) {
	b.Helper()
	close(s.stop)
	s.done.Wait()
	const mib = 1 << 20
	b.ReportMetric(float64(s.heap.Load())/mib, "peak-heap-MiB")
	b.ReportMetric(float64(s.heap.Load()-min(s.heap.Load(), s.baseHeap))/mib, "heap-growth-MiB")
	b.ReportMetric(float64(s.sys.Load())/mib, "peak-sys-MiB")
}
