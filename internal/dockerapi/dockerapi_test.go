package dockerapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
)

var daemon *dockertest.Daemon

const testImage = "hopper-test/busybox:1"

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if testing.Short() || dockertest.Missing() != "" {
			return m.Run()
		}
		d, err := dockertest.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting a private dockerd:", err)
			return 1
		}
		defer d.Stop()
		if err := d.ImportBusybox(context.Background(), "hopper-test/busybox", "1", map[string]string{"etc/marker": "hello from the image\n"}); err != nil {
			fmt.Fprintln(os.Stderr, "building the test image:", err)
			return 1
		}
		daemon = d
		return m.Run()
	}()
	os.Exit(code)
}

func needDaemon(tb testing.TB) *dockerapi.Client {
	tb.Helper()
	if daemon == nil {
		if m := dockertest.Missing(); m != "" {
			tb.Skip("needs Docker: " + m)
		}
		tb.Skip("needs Docker: not run with -short")
	}
	return daemon.Client
}

func TestContainerLifecycle(t *testing.T) {
	c := needDaemon(t)
	ctx := context.Background()
	id, err := c.CreateContainer(ctx, "", &dockerapi.ContainerConfig{
		Image:      testImage,
		Cmd:        []string{"sh", "-c", "echo out; echo err >&2; mkdir -p /work/d; echo data > /work/d/f; exit 3"},
		Labels:     map[string]string{"org.hopper-ci.test": t.Name()},
		HostConfig: dockerapi.HostConfig{NetworkMode: "none"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.RemoveContainer(context.Background(), id) })
	require.NoError(t, c.StartContainer(ctx, id))
	var out bytes.Buffer
	require.NoError(t, c.FollowLogs(ctx, id, &out))
	code, err := c.WaitContainer(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, code)
	// stdout and stderr reach the daemon through separate pipes, so only
	// the lines, not their order across the two, are certain.
	require.ElementsMatch(t, []string{"out", "err"}, strings.Fields(out.String()))

	list, err := c.ListContainers(ctx, "org.hopper-ci.test", t.Name())
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, id, list[0].ID)

	rc, st, err := c.CopyFrom(ctx, id, "/work/d")
	require.NoError(t, err)
	require.True(t, st.IsDir())
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, _ := io.ReadAll(tr)
		files[hdr.Name] = string(body)
	}
	rc.Close()
	require.Equal(t, "data\n", files["d/f"])
	_, _, err = c.CopyFrom(ctx, id, "/no/such/path")
	require.True(t, dockerapi.IsNotFound(err), "missing path: %v", err)

	require.NoError(t, c.RemoveContainer(ctx, id))
	require.NoError(t, c.RemoveContainer(ctx, id), "removing twice is not an error")
	list, err = c.ListContainers(ctx, "org.hopper-ci.test", t.Name())
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestKillStopsAtOnce(t *testing.T) {
	c := needDaemon(t)
	ctx := context.Background()
	id, err := c.CreateContainer(ctx, "", &dockerapi.ContainerConfig{
		Image: testImage, Cmd: []string{"sleep", "600"}, HostConfig: dockerapi.HostConfig{NetworkMode: "none"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.RemoveContainer(context.Background(), id) })
	require.NoError(t, c.StartContainer(ctx, id))
	require.NoError(t, c.KillContainer(ctx, id))
	code, err := c.WaitContainer(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 137, code)
	require.NoError(t, c.KillContainer(ctx, id), "killing a stopped container is not an error")
}

func TestImageSaveLoadTagAndPullFailure(t *testing.T) {
	c := needDaemon(t)
	ctx := context.Background()
	img, err := c.InspectImage(ctx, testImage)
	require.NoError(t, err)
	rc, err := c.SaveImage(ctx, testImage)
	require.NoError(t, err)
	tarball, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	refs, err := c.LoadImage(ctx, bytes.NewReader(tarball))
	require.NoError(t, err)
	require.Equal(t, []string{testImage}, refs)
	require.NoError(t, c.TagImage(ctx, img.ID, "hopper-test/other", "x"))
	other, err := c.InspectImage(ctx, "hopper-test/other:x")
	require.NoError(t, err)
	require.Equal(t, img.ID, other.ID)
	require.NoError(t, c.RemoveImage(ctx, "hopper-test/other:x"))

	_, err = c.LoadImage(ctx, strings.NewReader("not a tarball"))
	require.Error(t, err)
	_, err = c.InspectImage(ctx, "hopper-test/absent:1")
	require.True(t, dockerapi.IsNotFound(err))
	// No registry is reachable from these machines: the pull must fail
	// with the daemon's reason, not hang.
	pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	require.Error(t, c.PullImage(pctx, "127.0.0.1:1/hopper/absent:1"))
}

// BenchmarkStartToFirstLogLine measures the docker engine's per-task
// overhead: from asking the daemon for a container to reading the first
// line the container printed (create, start, attach to its log), plus the
// removal that ends every run.
func BenchmarkStartToFirstLogLine(b *testing.B) {
	c := needDaemon(b)
	ctx := context.Background()
	var total, firstLine time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		id, err := c.CreateContainer(ctx, "", &dockerapi.ContainerConfig{
			Image: testImage, Cmd: []string{"echo", "first line"}, HostConfig: dockerapi.HostConfig{NetworkMode: "none"},
		})
		require.NoError(b, err)
		require.NoError(b, c.StartContainer(ctx, id))
		w := &firstWrite{at: make(chan time.Time, 1)}
		require.NoError(b, c.FollowLogs(ctx, id, w))
		firstLine += (<-w.at).Sub(start)
		_, err = c.WaitContainer(ctx, id)
		require.NoError(b, err)
		require.NoError(b, c.RemoveContainer(ctx, id))
		total += time.Since(start)
	}
	b.ReportMetric(float64(firstLine.Milliseconds())/float64(b.N), "ms-to-first-line")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-create-to-removed")
}

// BenchmarkKillToExit measures how long a running container takes to stop
// once the worker decides to kill it (maxRunTime, cancellation, shutdown):
// from the kill request until the daemon reports the exit.
func BenchmarkKillToExit(b *testing.B) {
	c := needDaemon(b)
	ctx := context.Background()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		id, err := c.CreateContainer(ctx, "", &dockerapi.ContainerConfig{
			Image: testImage, Cmd: []string{"sleep", "600"}, HostConfig: dockerapi.HostConfig{NetworkMode: "none"},
		})
		require.NoError(b, err)
		require.NoError(b, c.StartContainer(ctx, id))
		start := time.Now()
		require.NoError(b, c.KillContainer(ctx, id))
		_, err = c.WaitContainer(ctx, id)
		require.NoError(b, err)
		total += time.Since(start)
		require.NoError(b, c.RemoveContainer(ctx, id))
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-kill-to-exit")
}

type firstWrite struct {
	at   chan time.Time
	seen bool
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if !w.seen {
		w.seen = true
		w.at <- time.Now()
	}
	return len(p), nil
}
