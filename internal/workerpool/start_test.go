package workerpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerpool"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// heldCreates is a Docker daemon's socket in front of a real one that
// holds every container creation until released, as a slow daemon
// (pulling, a loaded disk) does.
type heldCreates struct {
	host    string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
	// fail answers held creations with the daemon's error instead.
	fail bool
}

func holdCreates(t *testing.T, daemonHost string, fail bool) *heldCreates {
	t.Helper()
	sock := strings.TrimPrefix(daemonHost, "unix://")
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: "docker"}) },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
	}
	h := &heldCreates{held: make(chan struct{}, 16), release: make(chan struct{}), fail: fail}
	path := t.TempDir() + "/held.sock"
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/containers/create") {
			h.held <- struct{}{}
			<-h.release
			if h.fail {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`{"message":"no space left on device"}`))
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { h.let(); _ = srv.Close() })
	h.host = "unix://" + path
	return h
}

// let lets held and later creations through.
func (h *heldCreates) let() { h.once.Do(func() { close(h.release) }) }

// TestWorkerStartRacesTheScanner holds a docker pool's container creation
// while the worker scanner passes, on both drivers. The provisioner
// records a worker as requested before its container starts; a pass in
// between saw no container, reported worker-died and stopped the worker,
// and the container started anyway, outside the pool's accounting (2 of
// 5 campaign runs; every run with creation held). Now a worker whose
// start is under way is left to its registration deadline, and one
// removed while it started has its container removed once the start
// returns; a start that fails files one provisioning-error, where it
// filed a worker-died beside it.
func TestWorkerStartRacesTheScanner(t *testing.T) {
	t.Parallel()
	if m := dockertest.Missing(); m != "" {
		t.Skip(m)
	}
	d, err := dockertest.Start()
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, d.ImportBusybox(ctx, "busybox", "e2e", nil))
	dc, err := workerprovider.NewDockerClient(d.Host)
	require.NoError(t, err)

	for _, driver := range []string{"sqlite", "postgres"} {
		for _, c := range []struct{ removed, fails bool }{{false, false}, {true, false}, {false, true}} {
			removed, fails := c.removed, c.fails
			name := fmt.Sprintf("%s/removed-while-starting=%v/start-fails=%v", driver, removed, fails)
			// One daemon for all: the cases run one after another.
			t.Run(name, func(t *testing.T) {
				st := replicas(t, driver, 1)[0]
				clock := testclock.New(time.Now().Truncate(time.Millisecond))
				held := holdCreates(t, d.Host, fails)
				poolID := fmt.Sprintf("start-race/%s-%v-%v", driver, removed, fails)
				cfg, err := json.Marshal(map[string]any{"minCapacity": 1, "maxCapacity": 1, "image": "busybox:e2e",
					"command": []string{"sleep", "120"}, "network": "none", "hosts": []map[string]any{{"endpoint": held.host}},
					"lifecycle": map[string]any{"registrationTimeout": 600}})
				require.NoError(t, err)
				now := clock.Now()
				pool := &workermanager.Pool{WorkerPoolID: poolID, ProviderID: "docker", PreviousProviderIDs: []string{}, Config: cfg,
					Owner: "o@example.com", Created: now, LastModified: now}
				require.NoError(t, st.CreateWorkerPool(ctx, pool))
				providers := map[string]workerpool.PoolProvider{"docker": {Type: workermanager.ProviderTypeDocker, Provider: &workerprovider.Docker{}}}
				prov := &workerpool.Provisioner{Store: st, Providers: providers, RootURL: "http://127.0.0.1:1", Holder: "p", Clock: clock}
				scanner := &workerpool.WorkerScanner{Store: st, Providers: providers, Resolver: &workerpool.WorkerRunResolver{Store: st},
					Holder: "s", Clock: clock}

				started := make(chan error, 1)
				go func() {
					n, err := prov.RunOnce(ctx)
					if err == nil && n != 1 && !fails {
						err = fmt.Errorf("started %d workers", n)
					}
					started <- err
				}()
				select {
				case <-held.held:
				case err := <-started:
					t.Fatalf("the provisioner returned before creating a container: %v", err)
				case <-time.After(2 * time.Minute):
					t.Fatal("no container creation")
				}
				if removed {
					// The registration deadline passes while the start is
					// held: the scanner removes the worker.
					clock.Advance(11 * time.Minute)
				}
				_, err = scanner.RunOnce(ctx)
				require.NoError(t, err)
				held.let()
				require.NoError(t, <-started)

				workers, _, err := st.ListPoolWorkers(ctx, store.PoolWorkerFilter{WorkerPoolID: poolID}, store.Page{})
				require.NoError(t, err)
				require.Len(t, workers, 1)
				w := workers[0]
				ids, err := dc.ContainerIDs(ctx, "hopper.worker", w.WorkerGroup+"/"+w.WorkerID)
				require.NoError(t, err)
				errs, _, err := st.ListWorkerPoolErrors(ctx, store.PoolErrorFilter{WorkerPoolID: poolID}, store.Page{})
				require.NoError(t, err)
				var kinds []string
				for _, e := range errs {
					kinds = append(kinds, e.Kind)
				}
				t.Logf("worker %s, %d containers, pool errors %v", w.State, len(ids), kinds)
				if fails {
					require.Equal(t, workermanager.StateStopped, w.State)
					require.Empty(t, ids)
					require.Equal(t, []string{"provisioning-error"}, kinds, "one error for one failed start")
					return
				}
				if removed {
					require.Equal(t, workermanager.StateStopped, w.State)
					require.Empty(t, ids, "the container of a worker removed while it started is removed")
					require.Equal(t, []string{"registration-timeout"}, kinds)
					return
				}
				require.Equal(t, workermanager.StateRequested, w.State, "a worker whose start is under way is not stopped")
				require.Empty(t, kinds, "no error for a start under way")
				require.Len(t, ids, 1)
				state, err := dc.InspectContainer(ctx, ids[0])
				require.NoError(t, err)
				require.True(t, state.Running)
				// Its next pass sees it running, recorded.
				_, err = scanner.RunOnce(ctx)
				require.NoError(t, err)
				got, err := st.GetPoolWorker(ctx, w.Key())
				require.NoError(t, err)
				require.Equal(t, workermanager.StateRequested, got.State)
				require.NoError(t, dc.RemoveContainer(ctx, ids[0]))
			})
		}
	}
}
