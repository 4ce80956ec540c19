package workerprovider_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerprovider"
	"github.com/hopper-ci/hopper/internal/workerprovider/kubetest"
)

// benchPods is the fleet the benchmarks watch.
const benchPods = 1000

// kubeFleet starts a control plane with benchPods worker Pods of one pool
// (made by the provider, as the provisioner would).
func kubeFleet(b *testing.B) (*kubetest.Cluster, *workermanager.Pool, []*workermanager.Worker) {
	b.Helper()
	c := kubetest.Start(b)
	c.Namespace(b, "fleet")
	pool := kubePool(b, "fleet", nil)
	k := workerprovider.NewKubernetesForClient(c.Client, testAudience)
	defer k.Close()
	ctx := context.Background()
	workers := make([]*workermanager.Worker, benchPods)
	start := time.Now()
	for i := range workers {
		w := requestedWorker(pool, fmt.Sprintf("w%04d", i))
		data, err := k.Start(ctx, pool, w, workerprovider.Registration{RootURL: "http://hopper"})
		if err != nil {
			b.Fatal(err)
		}
		w.ProviderData = data
		workers[i] = w
	}
	b.Logf("%d Pods created in %s (%s a Pod)", benchPods, time.Since(start), time.Since(start)/benchPods)
	return c, pool, workers
}

// BenchmarkKubernetesScan is one worker-scanner pass's checks over 1,000
// worker Pods, read from the watch's cache (what the scanner does every
// --worker-scan-interval), and, for comparison, with a GET each.
func BenchmarkKubernetesScan(b *testing.B) {
	c, pool, workers := kubeFleet(b)
	ctx := context.Background()
	b.Run("watch-cache", func(b *testing.B) {
		k := workerprovider.NewKubernetesForClient(c.Client, testAudience)
		defer k.Close()
		// The first check starts the watch; wait for it to hold the fleet.
		start := time.Now()
		for {
			if _, err := k.Check(ctx, pool, workers[0]); err != nil {
				b.Fatal(err)
			}
			if k.Synced("fleet") {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-to-sync")
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		b.ReportMetric(float64(m.HeapInuse)/(1<<20), "MiB-heap")
		b.ResetTimer()
		for b.Loop() {
			for _, w := range workers {
				st, err := k.Check(ctx, pool, w)
				if err != nil || !st.Running {
					b.Fatal(err, st)
				}
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			for _, w := range workers {
				if _, err := c.Client.CoreV1().Pods("fleet").Get(ctx, workerprovider.PodName(w.Key()), metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
