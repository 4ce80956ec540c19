package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// WaitPolling waits until the queue behind q knows the worker: the queue
// records a worker at the start of each claimWork call (getWorker writes
// the pending records first), so the worker's first call is under way,
// about to wait or waiting in its long-poll. Tests that must act on a
// waiting worker (interrupt it, wake it) wait for this instead of
// sleeping.
func WaitPolling(t testing.TB, q *tcclient.Client, taskQueueID, workerGroup, workerID string) {
	t.Helper()
	provisioner, workerType, ok := strings.Cut(taskQueueID, "/")
	if !ok {
		t.Fatalf("task queue %q is not provisionerId/workerType", taskQueueID)
	}
	path := "/provisioners/" + url.PathEscape(provisioner) + "/worker-types/" + url.PathEscape(workerType) +
		"/workers/" + url.PathEscape(workerGroup) + "/" + url.PathEscape(workerID)
	testclock.WaitFor(t, 2*time.Minute, "worker "+workerGroup+"/"+workerID+" to call claimWork on "+taskQueueID, func() bool {
		err := q.Do(context.Background(), http.MethodGet, path, nil, nil, nil)
		if err != nil && tcclient.StatusCode(err) != http.StatusNotFound {
			t.Fatalf("getWorker %s: %v", path, err)
		}
		return err == nil
	})
}
