package e2e_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestServeDrainsOnSIGTERM: a claimWork long-poll in flight when the server
// gets SIGTERM is answered at once with no tasks, and the process exits.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	c := rootClient(srv)
	type result struct {
		res *tcclient.ClaimWorkResponse
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.ClaimWork(context.Background(), "drain/test", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
		done <- result{res, err, time.Now()}
	}()
	e2e.WaitPolling(t, c, "drain/test", "g", "w")
	sent := time.Now()
	require.NoError(t, srv.Signal(syscall.SIGTERM))
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Empty(t, r.res.Tasks)
		require.Less(t, r.at.Sub(sent), 5*time.Second, "long-poll was not ended early")
	case <-time.After(15 * time.Second):
		t.Fatal("claimWork still waiting after SIGTERM")
	}
	select {
	case <-srv.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("hopper serve did not exit after SIGTERM")
	}
}
