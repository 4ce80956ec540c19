package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// sccacheScript compiles one C file through Debian's sccache, its cache
// kept in S3 under cache/sccache/ with credentials the task asks for
// through its proxy (awsS3Credentials): Debian builds sccache without its
// S3 backend, so awscli carries sccache's disk cache to and from the
// bucket. It checks what sccache reports (STATS), then shows the
// credentials cannot write outside their prefix.
const sccacheScript = `set -eu
curl -sf "$TASKCLUSTER_PROXY_URL/api/auth/v1/aws/s3/read-write/cache/sccache/" > creds.json
export AWS_ACCESS_KEY_ID="$(jq -r .credentials.accessKeyId creds.json)"
export AWS_SECRET_ACCESS_KEY="$(jq -r .credentials.secretAccessKey creds.json)"
export AWS_SESSION_TOKEN="$(jq -r .credentials.sessionToken creds.json)"
rm creds.json
s3() { aws --endpoint-url "$MINIO" --region us-east-1 s3 "$@"; }
export SCCACHE_DIR="$PWD/sccache" SCCACHE_IDLE_TIMEOUT=0
mkdir -p "$SCCACHE_DIR"
s3 sync --only-show-errors s3://cache/sccache/ "$SCCACHE_DIR/"
printf 'int shared(int x) { return x * 7; }\n' > shared.c
sccache --start-server
sccache gcc -c shared.c -o shared.o
sccache --show-stats | tee stats.txt
sccache --stop-server >/dev/null || true
grep -E "$STATS" stats.txt
s3 sync --only-show-errors "$SCCACHE_DIR/" s3://cache/sccache/
echo outside > outside.txt
if s3 cp outside.txt s3://cache/elsewhere/outside.txt 2> denied.txt; then
  echo "wrote outside the prefix"; exit 1
fi
grep -q AccessDenied denied.txt
echo "refused outside the prefix"
`

// taskLog is a task's log, for a failure's message.
func taskLog(ctx context.Context, t *testing.T, root *tcclient.Client, taskID string) string {
	t.Helper()
	a, err := root.GetLatestArtifact(ctx, taskID, "public/logs/live_backing.log")
	if err != nil {
		return err.Error()
	}
	resp, err := http.Get(a.URL)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSccacheSharedThroughAWSS3Credentials: two tasks on two workers
// build the same file with Debian's sccache, its cache in a MinIO bucket
// reached with credentials from awsS3Credentials: the second hits what
// the first wrote, and neither can write outside the prefix.
func TestSccacheSharedThroughAWSS3Credentials(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"sccache", "aws", "jq", "curl", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install sccache awscli jq curl gcc)", tool)
		}
	}
	m := e2e.StartMinIO(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s3, err := minio.New(strings.TrimPrefix(m.URL, "http://"), &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	require.NoError(t, err)
	require.NoError(t, s3.MakeBucket(ctx, "cache", minio.MakeBucketOptions{}))
	srv := e2e.StartServer(t, e2e.ServerOptions{Env: []string{
		"HOPPER_AWS_S3_STS_ENDPOINT=" + m.URL, "HOPPER_AWS_S3_BUCKETS=cache",
		"HOPPER_AWS_S3_ACCESS_KEY_ID=" + m.AccessKey, "HOPPER_AWS_S3_SECRET_ACCESS_KEY=" + m.SecretKey,
	}})
	// A queue per worker, so each task runs on its own worker. Tasks
	// share the machine's network (isolation none), where MinIO listens
	// on loopback.
	for _, id := range []string{"w1", "w2"} {
		e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "e2e-sccache/" + id, WorkerID: id, Args: []string{"--isolation", "none"}})
	}
	root := rootClient(srv)
	build := func(worker, stats string) *tcclient.TaskStatus {
		t.Helper()
		task := newTask("e2e-sccache/" + worker)
		task.Scopes = []string{"auth:aws-s3:read-write:cache/sccache/"}
		payload, err := json.Marshal(map[string]any{
			"command":    [][]string{{"sh", "-c", sccacheScript}},
			"maxRunTime": 240,
			"features":   map[string]bool{"taskclusterProxy": true},
			"env":        map[string]string{"MINIO": m.URL, "STATS": stats, "SCCACHE_SERVER_PORT": strings.TrimPrefix(e2e.FreePort(t), "127.0.0.1:")},
		})
		require.NoError(t, err)
		task.Payload = payload
		taskID := tcclient.NewTaskID()
		_, err = root.CreateTask(ctx, taskID, task)
		require.NoError(t, err)
		for {
			st, err := root.Status(ctx, taskID)
			require.NoError(t, err)
			if st.State == tcclient.StateCompleted || st.State == tcclient.StateFailed || st.State == tcclient.StateException {
				require.Equal(t, tcclient.StateCompleted, st.State, "task %s: %s", taskID, taskLog(ctx, t, root, taskID))
				return st
			}
			select {
			case <-ctx.Done():
				t.Fatalf("task %s not resolved in time", taskID)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	first := build("w1", `Cache misses +1$`)
	second := build("w2", `Cache hits +1$`)
	require.Equal(t, "w1", first.Runs[0].WorkerID)
	require.Equal(t, "w2", second.Runs[0].WorkerID)
	n := 0
	for o := range s3.ListObjects(ctx, "cache", minio.ListObjectsOptions{Recursive: true}) {
		require.NoError(t, o.Err)
		require.True(t, strings.HasPrefix(o.Key, "sccache/"), "only the prefix was written: %s", o.Key)
		n++
	}
	require.Positive(t, n, "sccache wrote its cache to the bucket")
}
