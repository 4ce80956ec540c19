package workere2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestResolutions runs one task per outcome of docs/contract/worker.md §1.6 that the
// other end-to-end tests do not already cover (completed, plain failure,
// malformed schema, cancellation, worker-shutdown and claim expiry are
// elsewhere) through a real worker, and checks the run states, the log
// and the artifacts each outcome leaves behind.
func TestResolutions(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("resolutions")
	// The mount source: /flaky always fails with 503 (temporary), /gone
	// with 404 (permanent).
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			http.Error(w, "try later", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(src.Close)

	intermittent := createTaskWith(t, queue, map[string]any{
		"command":      [][]string{{"sh", "-c", `echo "attempt $RUN_ID"; test "$RUN_ID" = 1 || exit 3`}},
		"onExitStatus": map[string]any{"retry": []int{3, 4}},
		"maxRunTime":   60,
	}, nil)
	timeout := createTaskWith(t, queue, map[string]any{
		"command":    [][]string{{"sh", "-c", "echo before-sleep; sleep 30; echo after-sleep"}, {"echo", "SECOND-COMMAND"}},
		"maxRunTime": 1,
	}, nil)
	notFound := createTaskWith(t, queue, map[string]any{
		"command":    [][]string{{"/nonexistent/hopper-e2e-command", "arg"}, {"echo", "SECOND-COMMAND"}},
		"maxRunTime": 60,
	}, nil)
	missing := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", "mkdir adir; echo data > present.txt"}},
		"artifacts": []map[string]any{
			{"type": "file", "path": "missing.txt", "name": "public/missing.txt"},
			{"type": "file", "path": "adir", "name": "public/adir"},
			{"type": "directory", "path": "present.txt", "name": "public/present"},
			{"type": "file", "path": "optional.txt", "name": "public/optional.txt", "optional": true},
			{"type": "file", "path": "present.txt", "name": "public/present.txt"},
		},
		"maxRunTime": 60,
	}, nil)
	unavailable := createTaskWith(t, queue, map[string]any{
		"command":    [][]string{{"echo", "SHOULD-NOT-RUN"}},
		"mounts":     []any{map[string]any{"file": "in.txt", "content": map[string]any{"url": src.URL + "/flaky"}}},
		"maxRunTime": 60,
	}, nil)
	gone := createTaskWith(t, queue, map[string]any{
		"command":    [][]string{{"echo", "SHOULD-NOT-RUN"}},
		"mounts":     []any{map[string]any{"file": "in.txt", "content": map[string]any{"url": src.URL + "/gone"}}},
		"maxRunTime": 60,
	}, nil)

	// Six tasks plus the intermittent task's second run.
	w := startWorkerWith(t, queue, workerOpts{id: "resolutions", tasks: 7, config: map[string]any{"capacity": 4}})
	require.Equal(t, 0, w.wait(t, 60*time.Second))

	t.Run("intermittent-task", func(t *testing.T) {
		t.Parallel()
		st := status(t, intermittent)
		require.Len(t, st.Runs, 2)
		require.Equal(t, tcclient.StateException, st.Runs[0].State)
		require.Equal(t, tcclient.ReasonIntermittentTask, st.Runs[0].ReasonResolved)
		require.Equal(t, "task-retry", st.Runs[1].ReasonCreated)
		require.Equal(t, tcclient.StateCompleted, st.Runs[1].State)
		require.Equal(t, tcclient.StateCompleted, st.State)
		first := backingLog(t, intermittent, 0)
		require.Contains(t, first, "attempt 0\n")
		require.Contains(t, first, "Exit Code: 3")
		require.Contains(t, first, "Task resolution: exception/intermittent-task: Command 0 exited with code 3, listed in onExitStatus.retry")
		require.Contains(t, backingLog(t, intermittent, 1), "attempt 1\n")
	})

	t.Run("maxRunTime exceeded", func(t *testing.T) {
		t.Parallel()
		st := status(t, timeout)
		log := backingLog(t, timeout, 0)
		require.Equal(t, tcclient.StateFailed, st.State, "log:\n%s", log)
		require.Len(t, st.Runs, 1, "failed is final")
		ran := st.Runs[0].Resolved.Time.Sub(st.Runs[0].Started.Time)
		require.Less(t, ran, 15*time.Second, "the sleep was cut short")
		require.Contains(t, log, "\nbefore-sleep\n")
		require.NotContains(t, log, "\nafter-sleep\n")
		require.Contains(t, log, "Result: ABORTED (maxRunTime exceeded)")
		require.Contains(t, log, "Task resolution: failed: Aborting task: max run time exceeded (maxRunTime 1 seconds)")
		require.NotContains(t, log, "SECOND-COMMAND", "no command runs after the abort")
	})

	t.Run("command not found", func(t *testing.T) {
		t.Parallel()
		st := status(t, notFound)
		log := backingLog(t, notFound, 0)
		require.Equal(t, tcclient.StateFailed, st.State, "log:\n%s", log)
		require.Contains(t, log, "Could not start command 0:")
		require.Contains(t, log, "/nonexistent/hopper-e2e-command")
		require.Contains(t, log, "Task resolution: failed: Command 0 could not be started")
		require.NotContains(t, log, "Executing command 1")
	})

	t.Run("missing and wrong-type artifacts", func(t *testing.T) {
		t.Parallel()
		st := status(t, missing)
		log := backingLog(t, missing, 0)
		require.Equal(t, tcclient.StateFailed, st.State, "log:\n%s", log)
		arts := artifactsByName(t, missing, 0)
		ctx := context.Background()
		for name, reason := range map[string]string{
			"public/missing.txt": tcclient.ArtifactFileMissing,
			"public/adir":        tcclient.ArtifactInvalidResource,
			"public/present":     tcclient.ArtifactInvalidResource,
		} {
			require.Equal(t, tcclient.StorageError, arts[name].StorageType, name)
			_, err := shared.admin.GetArtifact(ctx, missing, 0, name)
			var apiErr *tcclient.APIError
			require.ErrorAs(t, err, &apiErr, name)
			require.Equal(t, http.StatusFailedDependency, apiErr.StatusCode, name)
			require.Equal(t, reason, apiErr.Reason, name)
		}
		require.NotContains(t, arts, "public/optional.txt", "a missing optional artifact is skipped silently")
		require.NotContains(t, log, "optional.txt")
		// The artifacts that exist are still uploaded.
		require.Equal(t, tcclient.StorageS3, arts["public/present.txt"].StorageType)
		require.Equal(t, "data\n", fetchArtifact(t, missing, 0, "public/present.txt").body)
		require.Contains(t, log, "missing.txt (artifact public/missing.txt): it does not exist")
		require.Contains(t, log, "Task resolution: failed: ")
	})

	t.Run("mount source unavailable", func(t *testing.T) {
		t.Parallel()
		st := status(t, unavailable)
		log := backingLog(t, unavailable, 0)
		require.Equal(t, tcclient.StateException, st.State, "log:\n%s", log)
		require.Equal(t, tcclient.ReasonResourceUnavailable, st.Runs[0].ReasonResolved)
		require.Len(t, st.Runs, 1, "resource-unavailable is final")
		require.Contains(t, log, "payload.mounts[0]: downloading url:"+src.URL+"/flaky failed after retries")
		require.Contains(t, log, "503 Service Unavailable")
		require.NotContains(t, log, "Executing command")
	})

	t.Run("mount source gone", func(t *testing.T) {
		t.Parallel()
		st := status(t, gone)
		log := backingLog(t, gone, 0)
		require.Equal(t, tcclient.StateException, st.State, "log:\n%s", log)
		require.Equal(t, tcclient.ReasonMalformedPayload, st.Runs[0].ReasonResolved)
		require.Contains(t, log, "payload.mounts[0]: GET "+src.URL+"/gone: 404 Not Found")
		require.NotContains(t, log, "Executing command")
	})
}

// TestArtifactTypes checks what a completed run publishes: every file of a
// directory artifact as its own s3 artifact with the content type of its
// extension (or the payload's), gzip-encoded unless already compressed,
// byte-identical on download; the backing log as gzip text; and the live
// log switched to a link to it (docs/contract/worker.md §2.4, §3).
func TestArtifactTypes(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("types")
	png := make([]byte, 4096)
	_, _ = rand.Read(png)
	script := `set -e
echo to-stdout; echo to-stderr >&2
mkdir -p out/sub
echo '{"a":1}' > out/data.json
echo '<p>hi</p>' > out/page.html
echo 'build ok' > out/build.log
echo 'raw bytes' > out/noext
echo '{"deep":true}' > out/sub/deep.json
cp in.png out/img.png
printf 'custom' > report.bin`
	id := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", script}},
		"mounts": []any{map[string]any{"file": "in.png",
			"content": map[string]any{"base64": base64.StdEncoding.EncodeToString(png)}}},
		"artifacts": []map[string]any{
			{"type": "directory", "path": "out", "name": "public/out"},
			{"type": "file", "path": "report.bin", "name": "public/report",
				"contentType": "application/x-hopper-report", "contentEncoding": "identity"},
		},
		"maxRunTime": 60,
	}, nil)
	w := startWorkerWith(t, queue, workerOpts{id: "types", tasks: 1})
	require.Equal(t, 0, w.wait(t, 60*time.Second))
	log := backingLog(t, id, 0)
	require.Equal(t, tcclient.StateCompleted, status(t, id).State, "log:\n%s", log)
	require.Contains(t, log, "to-stdout\n")
	require.Contains(t, log, "to-stderr\n")

	arts := artifactsByName(t, id, 0)
	files := []struct {
		name, contentType, encoding, body string
	}{
		{"public/out/data.json", "application/json", "gzip", "{\"a\":1}\n"},
		{"public/out/page.html", "text/html; charset=utf-8", "gzip", "<p>hi</p>\n"},
		{"public/out/build.log", "text/plain; charset=utf-8", "gzip", "build ok\n"},
		{"public/out/noext", "application/octet-stream", "gzip", "raw bytes\n"},
		{"public/out/sub/deep.json", "application/json", "gzip", "{\"deep\":true}\n"},
		{"public/out/img.png", "image/png", "", string(png)},
		{"public/report", "application/x-hopper-report", "", "custom"},
	}
	for _, f := range files {
		a, ok := arts[f.name]
		require.True(t, ok, "artifact %s missing; have %v", f.name, arts)
		require.Equal(t, tcclient.StorageS3, a.StorageType, f.name)
		require.Equal(t, f.contentType, a.ContentType, f.name)
		got := fetchArtifact(t, id, 0, f.name)
		require.Equal(t, f.contentType, got.header.Get("Content-Type"), f.name)
		require.Equal(t, f.encoding, got.header.Get("Content-Encoding"), f.name)
		require.Equal(t, f.body, got.body, f.name)
	}
	require.Equal(t, tcclient.StorageS3, arts["public/logs/live_backing.log"].StorageType)
	require.Equal(t, "text/plain; charset=utf-8", arts["public/logs/live_backing.log"].ContentType)
	require.Equal(t, tcclient.StorageLink, arts["public/logs/live.log"].StorageType)
	// The six directory files, the report and the two logs: nothing else
	// (the mounted in.png is not an artifact).
	require.Len(t, arts, len(files)+2, "artifacts: %v", arts)
}
