package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/live"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestLiveSlowStreamIsDropped: a stream whose reader stops reading does
// not hold up the queue: tasks are created while it reads nothing, the
// server's ring of events leaves it behind, and when it reads again it
// gets what was on its way and then the `dropped` event asking it to
// reconnect, and the stream ends. A stream that keeps reading meanwhile
// is not dropped.
func TestLiveSlowStreamIsDropped(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	c := rootClient(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	slow := openSlowStream(ctx, t, srv.RootURL)
	sentinel := tcclient.NewTaskID()
	keepsUp := openStream(ctx, t, srv.RootURL, "taskId="+sentinel)

	// Events carry the task's tags: 64 tags of 4,000 characters make each
	// event 256 KB, and 80 tasks 40 MB of events, well over what the
	// ring holds (16 MiB) and what the connection buffers while its
	// reader reads nothing.
	tags := map[string]string{}
	for i := range 64 {
		tags[fmt.Sprintf("tag%02d", i)] = strings.Repeat("x", 4000)
	}
	work := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var err error
			for range work {
				def := newTask("live/slow")
				def.Tags = tags
				if _, e := c.CreateTask(ctx, tcclient.NewTaskID(), def); e != nil && err == nil {
					err = e
				}
			}
			errs <- err
		}()
	}
	for range 80 {
		work <- struct{}{}
	}
	close(work)
	for range 4 {
		require.NoError(t, <-errs, "tasks are created while a stream reads nothing")
	}
	_, err := c.CreateTask(ctx, sentinel, newTask("live/slow"))
	require.NoError(t, err)
	require.Equal(t, "task-defined", nextExchange(t, keepsUp).Exchange, "the stream that reads is still there")

	// Now the slow reader reads: events, then the notice, then the end.
	r := bufio.NewReaderSize(slow, 1<<20)
	var last string
	events := 0
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if strings.HasPrefix(line, "data: ") {
			events++
		}
		if line != "\n" {
			last = line[:min(len(line), 60)] // events are long
		}
		if line == "event: dropped\n" {
			data, err := r.ReadString('\n')
			require.NoError(t, err)
			var notice struct {
				Reconnect bool   `json:"reconnect"`
				Reason    string `json:"reason"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &notice))
			require.True(t, notice.Reconnect)
			last = line
		}
	}
	require.Equal(t, "event: dropped\n", last, "the stream ends with the notice (after %d events)", events)
	require.Less(t, events, 2*80, "it did not get every event")
}

// openSlowStream opens the whole live stream over a connection with a
// small receive buffer and reads up to the subscription, then nothing
// until the caller reads the connection.
func openSlowStream(ctx context.Context, t *testing.T, rootURL string) net.Conn {
	t.Helper()
	u, err := url.Parse(rootURL)
	require.NoError(t, err)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			// Before connecting, so the window the server sees is small.
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", live.StreamPath, u.Host)
	require.NoError(t, err)
	// Byte by byte, so nothing after the subscription is read ahead.
	var head strings.Builder
	b := make([]byte, 1)
	for !strings.HasSuffix(head.String(), ": subscribed\n\n") {
		_, err := conn.Read(b)
		require.NoError(t, err, "reading the stream's head: %q", head.String())
		head.WriteByte(b[0])
	}
	require.True(t, strings.HasPrefix(head.String(), "HTTP/1.1 200 "), head.String())
	return conn
}
