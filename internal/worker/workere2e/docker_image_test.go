package workere2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// publishImageTask creates a task on a queue of its own, claims it as a
// worker would and publishes each file as the artifact named by its key,
// then completes it: an image "built" by another task.
func publishImageTask(t *testing.T, files map[string]string) string {
	t.Helper()
	ctx := context.Background()
	queue := uniqueQueue("image-producer")
	id := createTaskWith(t, queue, map[string]any{"image": busyboxImage, "maxRunTime": 60}, nil)
	resp, err := shared.admin.ClaimWork(ctx, queue, &tcclient.ClaimWorkRequest{WorkerGroup: "e2e", WorkerID: "producer", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, resp.Tasks, 1)
	claim := resp.Tasks[0]
	q := shared.admin.WithCredentials(&claim.Credentials)
	for name, file := range files {
		art, err := q.CreateArtifact(ctx, id, claim.RunID, name, &tcclient.CreateArtifactRequest{
			StorageType: tcclient.StorageS3, Expires: claim.Task.Expires, ContentType: "application/octet-stream",
		})
		require.NoError(t, err)
		up, err := tcclient.FileUpload(art.PutURL, "application/octet-stream", "", file)
		require.NoError(t, err)
		require.NoError(t, up.Do(ctx))
	}
	_, err = q.ReportCompleted(ctx, id, claim.RunID)
	require.NoError(t, err)
	return id
}

// indexTask points namespace at taskID through the Index service.
func indexTask(t *testing.T, namespace, taskID string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"taskId": taskID, "rank": 0, "data": map[string]any{},
		"expires": time.Now().Add(24 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")})
	require.NoError(t, err)
	url := shared.rootURL + "/api/index/v1/task/" + namespace
	auth, err := hawk.RequestHeader(hawk.Credentials{ID: rootClientID, Key: shared.token}, http.MethodPut, url,
		time.Now(), hawk.NewNonce(), "", "")
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "insertTask: %s", msg)
}

// TestDockerImageFromArtifact runs tasks whose image is another task's
// artifact (task-image), the second time from the image already loaded,
// and through the Index (indexed-image).
func TestDockerImageFromArtifact(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	// An image that exists only as a tarball: built, saved, removed.
	repo := fmt.Sprintf("hopper-test/from-artifact-%d", time.Now().UnixNano())
	require.NoError(t, d.ImportBusybox(ctx, repo, "1", map[string]string{"etc/marker": "image from an artifact\n"}))
	rc, err := d.Client.SaveImage(ctx, repo+":1")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "image.tar")
	data, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, data, 0o644))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	gzFile := file + ".gz"
	require.NoError(t, os.WriteFile(gzFile, gz.Bytes(), 0o644))
	require.NoError(t, d.Client.RemoveImage(ctx, repo+":1"))

	producer := publishImageTask(t, map[string]string{"public/image.tar": file, "public/image.tar.gz": gzFile})
	namespace := fmt.Sprintf("hopper.e2e.images.n%d", time.Now().UnixNano())
	indexTask(t, namespace, producer)

	queue := uniqueQueue("docker-image")
	byTask := map[string]any{"type": "task-image", "taskId": producer, "path": "public/image.tar"}
	first := createTaskWith(t, queue, map[string]any{"image": byTask, "command": []string{"cat", "/etc/marker"}, "maxRunTime": 60}, nil)
	second := createTaskWith(t, queue, map[string]any{"image": byTask, "command": []string{"cat", "/etc/marker"}, "maxRunTime": 60},
		func(d *tcclient.TaskDefinition) { d.Dependencies = []string{first} })
	indexed := createTaskWith(t, queue, map[string]any{
		"image":   map[string]any{"type": "indexed-image", "namespace": namespace, "path": "public/image.tar"},
		"command": []string{"cat", "/etc/marker"}, "maxRunTime": 60,
	}, func(d *tcclient.TaskDefinition) { d.Dependencies = []string{second} })
	gzipped := createTaskWith(t, queue, map[string]any{
		"image":   map[string]any{"type": "task-image", "taskId": producer, "path": "public/image.tar.gz"},
		"command": []string{"cat", "/etc/marker"}, "maxRunTime": 60,
	}, func(d *tcclient.TaskDefinition) { d.Dependencies = []string{indexed} })
	w := startDockerWorker(t, queue, workerOpts{id: "docker-image", tasks: 4})
	require.Equal(t, 0, w.wait(t, 120*time.Second))

	for _, id := range []string{first, second, indexed, gzipped} {
		log := logOf(t, id)
		require.Equal(t, tcclient.StateCompleted, status(t, id).State, log)
		require.Contains(t, log, "image from an artifact")
	}
	require.Contains(t, logOf(t, first), "Loading image tarball (sha256 ")
	require.Contains(t, logOf(t, first), "Loaded image "+repo+":1")
	require.Contains(t, logOf(t, second), "was loaded before")
	require.Contains(t, logOf(t, indexed), "Namespace "+namespace+" is indexed to task "+producer)
	require.Contains(t, logOf(t, gzipped), "Loaded image "+repo+":1", "a gzipped tarball is another digest, loaded again")
}
