package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// objectCall sends one Hawk-signed Object API call as the root client and
// decodes its JSON answer into out (nil: discard).
func objectCall(ctx context.Context, tb testing.TB, srv *e2e.Server, method, path string, in, out any) {
	tb.Helper()
	body, err := json.Marshal(in)
	require.NoError(tb, err)
	u := srv.RootURL + "/api/object/v1" + path
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	require.NoError(tb, err)
	header, err := hawk.RequestHeader(hawk.Credentials{ID: srv.ClientID, Key: srv.Token}, method, u, time.Now(), "", "", "")
	require.NoError(tb, err)
	req.Header.Set("Authorization", header)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode, "%s %s: %s", method, path, reply)
	if out != nil {
		require.NoError(tb, json.Unmarshal(reply, out))
	}
}

// BenchmarkObjectRoundTrip1GiB pushes a 1 GiB object through a running
// `hopper serve`, on each blob backend: createUpload (putUrl), one
// streamed PUT, finishUpload, then startDownload (getUrl) and one streamed
// GET (bytes generated and checksummed on the fly). It reports each
// direction's throughput and the server's peak resident memory (VmHWM),
// and fails if that peak suggests the server buffered the object. With
// S3 the upload streams through hopper's relay to the bucket and the
// download goes to the S3 service directly. Run it with
//
//	go test ./internal/e2e -run '^$' -bench ObjectRoundTrip1GiB -benchtime 1x
func BenchmarkObjectRoundTrip1GiB(b *testing.B) {
	for _, be := range blobBackends() {
		b.Run(be.name, func(b *testing.B) {
			srv := be.start(b, "--log-level", "info")
			pid := srv.PID()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			baseline := procStatusKB(b, pid, "VmHWM")
			const ct = "application/octet-stream"
			castagnoli := crc32.MakeTable(crc32.Castagnoli)
			var upTime, downTime time.Duration
			b.SetBytes(benchArtifactSize)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("bench/%d/%d.bin", time.Now().UnixNano(), i)
				size := int64(benchArtifactSize)
				uploadID := tcclient.NewTaskID()
				var created struct {
					UploadMethod struct {
						PutURL struct {
							URL     string            `json:"url"`
							Headers map[string]string `json:"headers"`
						} `json:"putUrl"`
					} `json:"uploadMethod"`
				}
				objectCall(ctx, b, srv, http.MethodPut, "/upload/"+tcclient.EscapePathParam(name), map[string]any{
					"projectId": "bench", "uploadId": uploadID, "expires": tcclient.NewTime(time.Now().Add(time.Hour)),
					"proposedUploadMethods": map[string]any{"putUrl": map[string]any{"contentType": ct, "contentLength": size}},
				}, &created)
				sent, took := putPattern(ctx, b, created.UploadMethod.PutURL.URL, created.UploadMethod.PutURL.Headers, size, uint64(i)+1)
				upTime += took
				objectCall(ctx, b, srv, http.MethodPost, "/finish-upload/"+tcclient.EscapePathParam(name),
					map[string]any{"projectId": "bench", "uploadId": uploadID}, nil)

				start := time.Now()
				var dl struct {
					URL string `json:"url"`
				}
				objectCall(ctx, b, srv, http.MethodPut, "/start-download/"+tcclient.EscapePathParam(name),
					map[string]any{"acceptDownloadMethods": map[string]bool{"getUrl": true}}, &dl)
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, dl.URL, nil)
				require.NoError(b, err)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(b, err)
				got := crc32.New(castagnoli)
				n, err := io.Copy(got, resp.Body)
				resp.Body.Close()
				downTime += time.Since(start)
				require.NoError(b, err)
				require.Equal(b, http.StatusOK, resp.StatusCode)
				require.Equal(b, size, n)
				require.Equal(b, sent, got.Sum32(), "downloaded bytes differ from the uploaded ones")
			}
			b.StopTimer()
			reportRoundTrip(b, pid, baseline, upTime, downTime, "object")
		})
	}
}
