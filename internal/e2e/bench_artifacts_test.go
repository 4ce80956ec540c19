package e2e_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// benchArtifactSize is the size of the benchmark's artifact.
const benchArtifactSize = 1 << 30

// benchMaxServerRSS bounds the server's peak resident memory during the
// benchmark: far below the artifact size, so a server that buffered an
// upload or a download in memory fails instead of merely looking slow.
const benchMaxServerRSS = 256 << 20

// patternBlockSize is the period of patternReader's output.
const patternBlockSize = 1 << 20

// patternReader yields size pseudo-random bytes without holding them: a
// random 1 MiB block repeated, each repetition stamped with its index so
// that no two megabytes are equal (a misplaced chunk changes the
// checksum).
type patternReader struct {
	remaining int64
	block     []byte
	off       int
	index     uint64
}

func newPatternReader(size int64, seed uint64) *patternReader {
	r := &patternReader{remaining: size, block: make([]byte, patternBlockSize)}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i < len(r.block); i += 8 {
		binary.LittleEndian.PutUint64(r.block[i:], rng.Uint64())
	}
	binary.LittleEndian.PutUint64(r.block, r.index)
	return r
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.remaining <= 0 {
		return 0, io.EOF
	}
	if r.off == len(r.block) {
		r.index++
		binary.LittleEndian.PutUint64(r.block, r.index)
		r.off = 0
	}
	n := copy(p, r.block[r.off:])
	if int64(n) > r.remaining {
		n = int(r.remaining)
	}
	r.off += n
	r.remaining -= int64(n)
	return n, nil
}

// procStatusKB reads a "<field>: N kB" line of /proc/<pid>/status.
func procStatusKB(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc to read the server's memory from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(tb, err)
			return n
		}
	}
	require.NoError(tb, sc.Err())
	tb.Fatalf("/proc/%d/status has no %s line", pid, field)
	return 0
}

// BenchmarkArtifactRoundTrip1GiB pushes a 1 GiB artifact through a running
// `hopper serve` with the built-in blob store: PUT to the putUrl, then GET
// of getArtifact's URL, streaming on both sides (the bytes are generated
// and checksummed on the fly). It reports the throughput of each direction
// and the server's peak resident memory (VmHWM), and fails if that peak
// suggests the server buffered the artifact. Run it with
//
//	go test ./internal/e2e -run '^$' -bench ArtifactRoundTrip1GiB -benchtime 1x
func BenchmarkArtifactRoundTrip1GiB(b *testing.B) {
	srv := blobBackends()[0].start(b, "--log-level", "info")
	pid := srv.PID()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := claimTask(ctx, b, srv, nil)
	baseline := procStatusKB(b, pid, "VmHWM")
	const ct = "application/octet-stream"
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var upTime, downTime time.Duration
	b.SetBytes(benchArtifactSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("public/bench/%d.bin", i)
		size := int64(benchArtifactSize)
		res, err := c.worker.CreateArtifact(ctx, c.taskID, 0, name, &tcclient.CreateArtifactRequest{
			StorageType: tcclient.StorageS3, Expires: tcclient.NewTime(time.Now().Add(time.Hour)), ContentType: ct, ContentLength: &size,
		})
		require.NoError(b, err)

		sent, took := putPattern(ctx, b, res.PutURL, map[string]string{"Content-Type": ct}, size, uint64(i)+1)
		upTime += took

		start := time.Now()
		loc, err := c.root.GetArtifact(ctx, c.taskID, 0, name)
		require.NoError(b, err)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.URL, nil)
		require.NoError(b, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		got := crc32.New(castagnoli)
		n, err := io.Copy(got, resp.Body)
		resp.Body.Close()
		downTime += time.Since(start)
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		require.Equal(b, strconv.FormatInt(size, 10), resp.Header.Get("Content-Length"))
		require.Equal(b, size, n)
		require.Equal(b, sent, got.Sum32(), "downloaded bytes differ from the uploaded ones")
	}
	b.StopTimer()
	reportRoundTrip(b, pid, baseline, upTime, downTime, "artifact")
}

// putPattern uploads size bytes of patternReader(seed) to putURL with
// headers and returns their CRC-32C and how long the upload took.
func putPattern(ctx context.Context, b *testing.B, putURL string, headers map[string]string, size int64, seed uint64) (uint32, time.Duration) {
	sent := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	body := io.TeeReader(newPatternReader(size, seed), sent)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, putURL, io.NopCloser(body))
	require.NoError(b, err)
	req.ContentLength = size
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	require.Equal(b, http.StatusOK, resp.StatusCode, "upload: %s", msg)
	return sent.Sum32(), took
}

// reportRoundTrip reports a round-trip benchmark's throughput and the
// server's memory, and fails when the server's peak RSS suggests it held
// what (an artifact, an object) in memory.
func reportRoundTrip(b *testing.B, pid int, baseline int64, upTime, downTime time.Duration, what string) {
	peak := procStatusKB(b, pid, "VmHWM")
	mb := float64(benchArtifactSize) * float64(b.N) / 1e6
	b.ReportMetric(mb/upTime.Seconds(), "upload-MB/s")
	b.ReportMetric(mb/downTime.Seconds(), "download-MB/s")
	b.ReportMetric(float64(peak)/1024, "server-peak-RSS-MiB")
	b.ReportMetric(float64(baseline)/1024, "server-idle-RSS-MiB")
	require.Less(b, peak*1024, int64(benchMaxServerRSS), "the server's peak RSS suggests it buffered the %s", what)
	b.Logf("1 GiB x %d: upload %.0f MB/s, download %.0f MB/s, server VmHWM %d KiB (idle %d KiB)",
		b.N, mb/upTime.Seconds(), mb/downTime.Seconds(), peak, baseline)
}
