package e2e_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestObjectPutURLTakesChunkedUploads uploads an object through its putUrl
// the way Taskcluster's Go client (generic-worker with
// createObjectArtifacts) does: chunked, the Content-Length header it was
// given dropped by net/http. On S3 a presigned URL refuses that with 411;
// hopper's relay must take it on every blob backend.
func TestObjectPutURLTakesChunkedUploads(t *testing.T) {
	t.Parallel()
	for _, be := range blobBackends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			srv := be.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const ct = "application/octet-stream"
			data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB: above dataInline's size
			name := "gwcheck/" + tcclient.NewTaskID() + "/chunked.bin"
			uploadID := tcclient.NewTaskID()
			var created struct {
				UploadMethod struct {
					PutURL struct {
						URL     string            `json:"url"`
						Headers map[string]string `json:"headers"`
					} `json:"putUrl"`
				} `json:"uploadMethod"`
			}
			objectCall(ctx, t, srv, http.MethodPut, "/upload/"+tcclient.EscapePathParam(name), map[string]any{
				"projectId": "gwcheck", "uploadId": uploadID, "expires": tcclient.NewTime(time.Now().Add(time.Hour)),
				"proposedUploadMethods": map[string]any{"putUrl": map[string]any{"contentType": ct, "contentLength": len(data)}},
			}, &created)
			// An io.Reader of unknown length: net/http sends it chunked and
			// ignores the Content-Length among the headers, as in the Go client.
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, created.UploadMethod.PutURL.URL, io.MultiReader(bytes.NewReader(data)))
			require.NoError(t, err)
			for k, v := range created.UploadMethod.PutURL.Headers {
				req.Header.Set(k, v)
			}
			require.EqualValues(t, 0, req.ContentLength)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "chunked PUT to %s: %s", created.UploadMethod.PutURL.URL, msg)
			objectCall(ctx, t, srv, http.MethodPost, "/finish-upload/"+tcclient.EscapePathParam(name),
				map[string]any{"projectId": "gwcheck", "uploadId": uploadID}, nil)

			var dl struct {
				URL string `json:"url"`
			}
			objectCall(ctx, t, srv, http.MethodPut, "/start-download/"+tcclient.EscapePathParam(name),
				map[string]any{"acceptDownloadMethods": map[string]bool{"getUrl": true}}, &dl)
			resp, err = http.Get(dl.URL)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, data, got, "the object holds exactly the uploaded bytes")
		})
	}
}
