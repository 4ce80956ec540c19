package tasklog_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/worker/tasklog"
)

func setup(t *testing.T) *tasklog.Log {
	t.Helper()
	l, err := tasklog.Create(filepath.Join(t.TempDir(), "live_backing.log"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Release() })
	return l
}

func TestPrefixes(t *testing.T) {
	t.Parallel()
	l := setup(t)
	l.Infof("hello %s", "world")
	_, err := io.WriteString(l, "partial output")
	require.NoError(t, err)
	l.Warnf("two\nlines")
	l.Errorf("bad")
	l.Close()
	_, err = io.WriteString(l, "late")
	require.ErrorIs(t, err, tasklog.ErrClosed)

	data, err := io.ReadAll(l.Reader())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(t, lines, 5)
	ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`
	require.Regexp(t, regexp.MustCompile(`^\[taskcluster `+ts+`\] hello world$`), lines[0])
	require.Equal(t, "partial output", lines[1])
	require.Regexp(t, regexp.MustCompile(`^\[taskcluster:warn `+ts+`\] two$`), lines[2])
	require.Regexp(t, regexp.MustCompile(`^\[taskcluster:warn `+ts+`\] lines$`), lines[3])
	require.Equal(t, "[taskcluster:error] bad", lines[4])

	var gz bytes.Buffer
	require.NoError(t, l.GzipTo(&gz))
	zr, err := gzip.NewReader(&gz)
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, data, plain)
}

func TestLiveServerStreams(t *testing.T) {
	t.Parallel()
	l := setup(t)
	l.Infof("before follow")
	live, err := tasklog.StartLive(l, "127.0.0.1", "")
	require.NoError(t, err)
	defer func() { require.NoError(t, live.Close(time.Second)) }()
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/log/[0-9a-f]{32}$`, live.URL())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, live.URL(), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, first, "before follow")

	// Output written after the client connected arrives while the log is
	// still open.
	_, _ = io.WriteString(l, "streamed line\n")
	second, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "streamed line\n", second)

	l.Close()
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	require.Empty(t, rest)

	// Wrong token: 404.
	bad, err := http.Get(live.URL()[:strings.LastIndex(live.URL(), "/")] + "/not-the-token")
	require.NoError(t, err)
	bad.Body.Close()
	require.Equal(t, http.StatusNotFound, bad.StatusCode)
}
