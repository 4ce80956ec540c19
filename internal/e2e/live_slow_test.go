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
	keepsUp := openStream(ctx, t, srv.RootURL, "taskQueueId=live/slow")

	// Events carry the task's tags: 16 tags of 3,000 characters make each
	// event 48 KB, and 240 tasks 23 MB of events, more than the ring
	// holds (16 MiB of events and their encoding, 8 MB of events) and
	// what the connection buffers (4 MB sent, 16 KB received) while the
	// slow reader reads nothing. Tasks are created 8 at a time, each 8
	// once the stream that reads has seen them: that one never falls
	// behind however fast this machine creates them.
	tags := map[string]string{}
	for i := range 16 {
		tags[fmt.Sprintf("tag%02d", i)] = strings.Repeat("x", 3000)
	}
	const batches, perBatch = 30, 8
	for range batches {
		ids := map[string]bool{}
		errs := make(chan error, perBatch)
		for range perBatch {
			id := tcclient.NewTaskID()
			ids[id] = true
			go func() {
				def := newTask("live/slow")
				def.Tags = tags
				_, err := c.CreateTask(ctx, id, def)
				errs <- err
			}()
		}
		for range perBatch {
			require.NoError(t, <-errs, "tasks are created while a stream reads nothing")
		}
		for len(ids) > 0 {
			ev := nextExchange(t, keepsUp)
			require.NotEmpty(t, ev.Exchange, "the stream that reads is not dropped")
			if ev.Exchange == "task-defined" {
				delete(ids, strings.Split(ev.RoutingKey, ".")[1])
			}
		}
	}

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
	require.Less(t, events, 2*batches*perBatch, "it did not get every event")
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
