package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/store"
)

// TestHeadAndTail: an artifact of at most 2*keep bytes comes whole; a
// longer one as its first and last keep bytes, whatever the reads' sizes.
func TestHeadAndTail(t *testing.T) {
	data := make([]byte, 300000)
	for i := range data {
		data[i] = byte(i % 251)
	}
	for _, tc := range []struct {
		name     string
		size     int
		keep     int
		wantTail bool
	}{
		{"empty", 0, 10, false},
		{"short", 15, 10, false},
		{"exactly twice keep", 20, 10, false},
		{"one byte over", 21, 10, true},
		{"long", 300000, 1000, true},
		{"long, keep over a read", 300000, 100000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []func() *bytes.Reader{func() *bytes.Reader { return bytes.NewReader(data[:tc.size]) }} {
				for _, reader := range []interface{ Read([]byte) (int, error) }{r(), iotest.OneByteReader(r()), iotest.HalfReader(r())} {
					head, tail, err := headAndTail(reader, tc.keep)
					require.NoError(t, err)
					if !tc.wantTail {
						require.Nil(t, tail)
						require.Equal(t, data[:tc.size], head[:len(head):len(head)])
						continue
					}
					require.Equal(t, data[:tc.keep], head)
					require.Equal(t, data[tc.size-tc.keep:tc.size], tail)
				}
			}
		})
	}
}

// oneArtifact is the store's record of one artifact, stored in blob
// storage and uploaded.
type oneArtifact struct{}

func (oneArtifact) GetArtifact(_ context.Context, taskID string, runID int, name string) (*store.Artifact, error) {
	return &store.Artifact{TaskID: taskID, RunID: runID, Name: name, StorageType: "s3", Present: true}, nil
}

// TestLogTail: notify's log tail is the last lines of the run's backing
// log, read from real (local) blob storage, gzip-encoded or not, long or
// short, through the one artifact reader the forge's check runs use.
func TestLogTail(t *testing.T) {
	t.Parallel()
	var local *artifacts.Local
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { local.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	local, err := artifacts.NewLocal(artifacts.LocalOptions{Dir: t.TempDir(), BaseURL: hs.URL, SigningKey: bytes.Repeat([]byte("k"), 32)})
	require.NoError(t, err)
	reader := newArtifactReader(oneArtifact{}, local, 64<<20, 10*time.Second)
	ctx := context.Background()
	var long strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	for i, tc := range []struct {
		log, encoding string
		want          string
	}{
		{"one\ntwo\n", "", "one\ntwo"},
		{long.String(), "", notify.TailLines([]byte(long.String()), notify.LogTailLines, notify.MaxLogTailSize)},
		{long.String(), "gzip", notify.TailLines([]byte(long.String()), notify.LogTailLines, notify.MaxLogTailSize)},
	} {
		body := []byte(tc.log)
		if tc.encoding == "gzip" {
			var buf bytes.Buffer
			gz := gzip.NewWriter(&buf)
			_, err := gz.Write(body)
			require.NoError(t, err)
			require.NoError(t, gz.Close())
			body = buf.Bytes()
		}
		_, err := local.Put(ctx, artifacts.BlobKey("task", i, "public/logs/live_backing.log"), "text/plain", tc.encoding, int64(len(body)), bytes.NewReader(body))
		require.NoError(t, err)
		got, err := reader.logTail(ctx, "task", i)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "case %d", i)
		require.Contains(t, tc.log, got)
	}
	require.Contains(t, notify.TailLines([]byte(long.String()), notify.LogTailLines, notify.MaxLogTailSize), "line 19999")
}
