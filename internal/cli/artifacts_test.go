package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// taskWithArtifacts creates a running task with an s3, a reference and an
// error artifact on run 0.
func taskWithArtifacts(t *testing.T) *harness {
	t.Helper()
	fake, h := fakeSetup(t)
	// Artifacts may not outlive their task.
	file := writeFile(t, "task.yml", "taskId: "+taskA+"\npayload: {}\nexpires: 2031-01-01T00:00:00Z\n")
	require.NoError(t, h.exec(context.Background(), "create", "-f", file))
	h.resetOutput()
	ctx := context.Background()
	claim, c := newWorker(t, fake).claim(ctx)
	require.NotNil(t, claim)
	exp := tcclient.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	resp, err := c.CreateArtifact(ctx, taskA, 0, "public/report.txt", &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, ContentType: "text/plain", Expires: exp,
	})
	require.NoError(t, err)
	require.NoError(t, tcclient.BytesUpload(resp.PutURL, "text/plain", "", []byte("all good\n")).Do(ctx))
	resp, err = c.CreateArtifact(ctx, taskA, 0, "public/count.txt", &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, ContentType: "text/plain", Expires: exp,
	})
	require.NoError(t, err)
	require.NoError(t, tcclient.BytesUpload(resp.PutURL, "text/plain", "", []byte("42")).Do(ctx))
	_, err = c.CreateArtifact(ctx, taskA, 0, "public/docs", &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageReference, URL: "https://example.com/docs", ContentType: "text/html", Expires: exp,
	})
	require.NoError(t, err)
	_, err = c.CreateArtifact(ctx, taskA, 0, "public/missing.bin", &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageError, Reason: tcclient.ArtifactFileMissing, Message: "no such file: missing.bin\nsecond line", Expires: exp,
	})
	require.NoError(t, err)
	return h
}

func TestArtifactsOfARun(t *testing.T) {
	t.Parallel()
	h := taskWithArtifacts(t)
	ctx := context.Background()
	require.NoError(t, h.exec(ctx, "artifacts", "--run", "0", taskA))
	require.Equal(t, `NAME                STORAGE    CONTENT TYPE        EXPIRES
public/count.txt    s3         text/plain          2030-01-02T03:04:05.000Z
public/docs         reference  text/html           2030-01-02T03:04:05.000Z
public/missing.bin  error      application/binary  2030-01-02T03:04:05.000Z
public/report.txt   s3         text/plain          2030-01-02T03:04:05.000Z
`, h.stdout.String())

	h.resetOutput()
	require.NoError(t, h.exec(ctx, "artifacts", "--json", "--run", "0", taskA))
	var out artifactsOutput
	require.NoError(t, json.Unmarshal([]byte(h.stdout.String()), &out))
	require.Equal(t, taskA, out.TaskID)
	require.Equal(t, 0, *out.RunID)
	require.Len(t, out.Artifacts, 4)
	require.Equal(t, "public/count.txt", out.Artifacts[0].Name)

	err := h.exec(ctx, "artifacts", "--run", "1", taskA)
	require.Equal(t, ExitFailed, exitCode(err))
	require.ErrorContains(t, err, "listing artifacts of task "+taskA+": ResourceNotFound (HTTP 404)")
}

func TestArtifactGet(t *testing.T) {
	t.Parallel()
	h := taskWithArtifacts(t)
	ctx := context.Background()

	require.NoError(t, h.exec(ctx, "artifact", "get", taskA, "public/report.txt"))
	require.Equal(t, "all good\n", h.stdout.String())

	// A terminal gets a final newline the file lacks; a pipe the bytes
	// as they are.
	for _, tt := range []struct {
		tty        bool
		name, want string
	}{
		{false, "public/count.txt", "42"},
		{true, "public/count.txt", "42\n"},
		{true, "public/report.txt", "all good\n"},
	} {
		h.resetOutput()
		h.env.TTY = tt.tty
		require.NoError(t, h.exec(ctx, "artifact", "get", taskA, tt.name))
		require.Equal(t, tt.want, h.stdout.String(), "tty=%v %s", tt.tty, tt.name)
	}
	h.env.TTY = false

	h.resetOutput()
	dest := filepath.Join(t.TempDir(), "report.txt")
	require.NoError(t, h.exec(ctx, "artifact", "get", "--run", "0", "-o", dest, taskA, "public/report.txt"))
	data, err := os.ReadFile(dest)
	require.NoError(t, err)
	require.Equal(t, "all good\n", string(data))
	require.Equal(t, "Wrote 9 bytes to "+dest+"\n", h.stderr.String())
	require.Empty(t, h.stdout.String())
	leftovers, err := filepath.Glob(filepath.Join(filepath.Dir(dest), ".report.txt.part-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers)

	h.resetOutput()
	require.NoError(t, h.exec(ctx, "artifact", "get", "--json", taskA, "public/docs"))
	var out artifactOutput
	require.NoError(t, json.Unmarshal([]byte(h.stdout.String()), &out))
	require.Equal(t, artifactOutput{TaskID: taskA, Name: "public/docs", StorageType: "reference", URL: "https://example.com/docs"}, out)

	h.resetOutput()
	require.NoError(t, h.exec(ctx, "artifact", "get", "--json", "-o", dest, taskA, "public/report.txt"))
	out = artifactOutput{}
	require.NoError(t, json.Unmarshal([]byte(h.stdout.String()), &out))
	require.Equal(t, "s3", out.StorageType)
	require.Equal(t, dest, out.File)
	require.Equal(t, int64(9), *out.Bytes)

	err = h.exec(ctx, "artifact", "get", taskA, "public/missing.bin")
	require.Equal(t, ExitFailed, exitCode(err))
	require.EqualError(t, err, "getting artifact public/missing.bin of task "+taskA+
		": it is an error artifact (file-missing-on-worker): no such file: missing.bin")

	err = h.exec(ctx, "artifact", "get", taskA, "public/nope")
	require.Equal(t, ExitFailed, exitCode(err))
	require.ErrorContains(t, err, "ResourceNotFound (HTTP 404)")
}

// cannedQueue serves canned pages of listLatestArtifacts and listTaskGroup,
// which the fake queue does not implement, and counts calls per route.
type cannedQueue struct {
	*httptest.Server
	// groupPolls returns the members of the task group for the n-th poll
	// (0-based); each poll is served as pages of one task.
	groupPolls func(n int) []tcclient.TaskGroupMember

	mu    sync.Mutex
	polls int
}

func newCannedQueue(t *testing.T) *cannedQueue {
	s := &cannedQueue{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		q := r.URL.Query()
		switch {
		case r.URL.Path == "/api/queue/v1/task/"+taskA+"/artifacts":
			page := tcclient.ListArtifactsResponse{}
			exp := tcclient.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			if q.Get("continuationToken") == "" {
				page.Artifacts = []tcclient.Artifact{{Name: "public/a", StorageType: "s3", ContentType: "text/plain", Expires: exp}}
				page.ContinuationToken = "page2"
			} else {
				page.Artifacts = []tcclient.Artifact{{Name: "public/b", StorageType: "link", ContentType: "text/plain", Expires: exp}}
			}
			_ = json.NewEncoder(w).Encode(page)
		case r.URL.Path == "/api/queue/v1/task-group/"+taskB+"/list":
			s.mu.Lock()
			defer s.mu.Unlock()
			members := s.groupPolls(s.polls)
			i := 0
			if tok := q.Get("continuationToken"); tok != "" {
				_, _ = fmt.Sscanf(tok, "%d", &i)
			}
			page := tcclient.ListTaskGroupResponse{TaskGroupID: taskB, SchedulerID: "-", Tasks: members[i : i+1]}
			if i+1 < len(members) {
				page.ContinuationToken = fmt.Sprint(i + 1)
			} else {
				s.polls++
			}
			_ = json.NewEncoder(w).Encode(page)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"ResourceNotFound","message":"no such thing\n\n---\n\n* details"}`))
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestArtifactsOfTheLatestRunFollowPages(t *testing.T) {
	t.Parallel()
	canned := newCannedQueue(t)
	h := newHarness(t, canned.URL, nil)
	require.NoError(t, h.exec(context.Background(), "artifacts", taskA))
	require.Equal(t, `NAME      STORAGE  CONTENT TYPE  EXPIRES
public/a  s3       text/plain    2030-01-01T00:00:00.000Z
public/b  link     text/plain    2030-01-01T00:00:00.000Z
`, h.stdout.String())

	err := h.exec(context.Background(), "artifacts", taskB)
	require.EqualError(t, err, "listing artifacts of task "+taskB+": ResourceNotFound (HTTP 404): no such thing")
}

func TestRenderArtifactsEmpty(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	require.NoError(t, RenderArtifacts(&b, nil))
	require.Equal(t, "No artifacts.\n", b.String())
}
