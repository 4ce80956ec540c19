package workere2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// balancer is the load balancer in front of two replicas: workers'
// tunnels go to B while it is up, everything else to A, so a viewer's
// request crosses from A to B, and once B is marked down every request
// goes to A, as a load balancer's health check would have it.
type balancer struct {
	a, b  *url.URL
	bDown atomic.Bool
}

func (l *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := l.a
	if r.Header.Get("x-websocktunnel-id") != "" && !l.bDown.Load() {
		target = l.b
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.FlushInterval = -1
	p.ServeHTTP(w, r)
}

// TestLiveLogThroughTunnelSurvivesReplicaKill: a worker with no inbound
// port (liveLogTunnel) streams its live log through hopper's tunnel; two
// replicas behind a load balancer, the worker's tunnel on B, the viewer
// (`hopper task log --follow`) on A. B is killed (SIGKILL) mid-stream: the
// worker connects its tunnel again (to A), the viewer's stream resumes
// while the task still runs, and every line arrives exactly once, in
// order.
func TestLiveLogThroughTunnelSurvivesReplicaKill(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	lb := &balancer{}
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close)
	rs := startReplicas(t, 2, "--root-url", front.URL)
	a, b := rs[0], rs[1]
	lb.a, _ = url.Parse(a.rootURL)
	lb.b, _ = url.Parse(b.rootURL)
	via := &env{bin: a.bin, rootURL: front.URL, token: a.token, admin: &tcclient.Client{RootURL: front.URL, Credentials: a.admin.Credentials}}

	queue := uniqueQueue("tunnellog")
	startWorkerWith(t, queue, workerOpts{id: "tunnellog", tasks: 1, server: via, config: map[string]any{"liveLogTunnel": true}})
	const lines = 300
	id := createTaskOn(t, via, queue, map[string]any{
		"command":    [][]string{{"sh", "-c", fmt.Sprintf("i=1; while [ $i -le %d ]; do echo line-$i; i=$((i+1)); sleep 0.1; done", lines)}},
		"maxRunTime": 600,
	}, nil)

	out := &e2e.SyncBuffer{}
	cli := exec.Command(a.bin, "task", "log", "--follow", id)
	cli.Env = append(os.Environ(), "TASKCLUSTER_ROOT_URL="+front.URL, "TASKCLUSTER_CLIENT_ID="+rootClientID, "TASKCLUSTER_ACCESS_TOKEN="+a.token)
	cli.Stdout = out
	cli.Stderr = os.Stderr
	require.NoError(t, cli.Start())
	done := make(chan error, 1)
	go func() { done <- cli.Wait() }()
	t.Cleanup(func() { _ = cli.Process.Kill() })

	testclock.WaitFor(t, 3*time.Minute, "the live log to reach line-40 through A and B", func() bool {
		return strings.Contains(out.String(), "line-40\n")
	})
	art, err := via.admin.GetArtifact(context.Background(), id, 0, "public/logs/live.log")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(art.URL, front.URL+"/websocktunnel/"), "the live log is served through hopper: %s", art.URL)

	lb.bDown.Store(true)
	require.NoError(t, b.process.Kill())
	seen := strings.Count(out.String(), "\n")
	testclock.WaitFor(t, 3*time.Minute, "the stream to resume after B died", func() bool {
		return strings.Count(out.String(), "\n") > seen+30
	})
	st, err := via.admin.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, tcclient.StateRunning, st.State, "the stream resumed while the task ran, not from its backing log")

	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Minute):
		t.Fatal("hopper task log --follow did not end with the task")
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "line-") {
			got = append(got, l)
		}
	}
	want := make([]string, lines)
	for i := range want {
		want[i] = fmt.Sprintf("line-%d", i+1)
	}
	require.Equal(t, want, got, "every line once, in order")
}
