package workere2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// proxyScript calls the queue through the task's proxy with curl and
// records "<label> <status>" lines in out/codes and each reply body in
// out/<label>.json. curl without -f exits 0 on HTTP errors, so the task
// completes whatever the answers are and the test judges them.
const proxyScript = `set -eu
mkdir out
call() {
	label=$1; shift
	code=$(curl -sS -o "out/$label.json" -w '%{http_code}' "$@")
	echo "$label $code" >> out/codes
}
q="$TASKCLUSTER_PROXY_URL/api/queue/v1"
call get-other "$q/task/$OTHER"
call cancel-victim -X POST "$q/task/$VICTIM/cancel"
call cancel-other -X POST "$q/task/$OTHER/cancel"
call report-completed -X POST "$q/task/$TASK_ID/runs/$RUN_ID/completed"
call create-artifact -X POST -H 'Content-Type: application/json' \
	--data "{\"storageType\":\"reference\",\"expires\":\"$ARTIFACT_EXPIRES\",\"contentType\":\"text/plain\",\"url\":\"https://example.com/via-proxy\"}" \
	"$q/task/$TASK_ID/runs/$RUN_ID/artifacts/public%2Fvia-proxy"
`

// TestProxyEnforcesTaskScopes runs a task that talks to the queue through
// taskclusterProxy: calls its scopes allow succeed, calls beyond them get
// 403 InsufficientScopes, and the run's own credentials cannot be used to
// resolve the run (authorizedScopes = task.scopes + create-artifact,
// docs/contract/worker.md §4). The anonymous role may read any task, so the decisive
// checks are writes anonymous cannot make.
func TestProxyEnforcesTaskScopes(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("proxy")
	// other and victim sit on a queue nobody serves, so they stay pending
	// unless the proxied calls change them.
	idle := uniqueQueue("idle")
	noop := map[string]any{"command": [][]string{{"true"}}, "maxRunTime": 60}
	other := createTaskWith(t, idle, noop, nil)
	victim := createTaskWith(t, idle, noop, nil)
	id := createTaskWith(t, queue, map[string]any{
		"command":  [][]string{{"sh", "-c", proxyScript}},
		"features": map[string]bool{"taskclusterProxy": true},
		"env": map[string]string{"OTHER": other, "VICTIM": victim,
			"ARTIFACT_EXPIRES": time.Now().Add(2 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")},
		"artifacts":  []map[string]any{{"type": "directory", "path": "out", "name": "public/proxy"}},
		"maxRunTime": 120,
	}, func(d *tcclient.TaskDefinition) {
		d.Scopes = []string{
			"queue:get-task:" + other,
			// schedulerId "-" and taskGroupId = taskId are createTask's
			// defaults.
			fmt.Sprintf("queue:cancel-task:-/%s/%s", victim, victim),
		}
	})
	w := startWorkerWith(t, queue, workerOpts{id: "proxy", tasks: 1})
	require.Equal(t, 0, w.wait(t, 60*time.Second))

	st := status(t, id)
	log := backingLog(t, id, 0)
	require.Equal(t, tcclient.StateCompleted, st.State, "log:\n%s", log)
	require.Contains(t, log, "Taskcluster proxy listening at http://127.0.0.1:")

	codes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(fetchArtifact(t, id, 0, "public/proxy/codes").body), "\n") {
		label, code, ok := strings.Cut(line, " ")
		require.True(t, ok, "line %q", line)
		codes[label] = code
	}
	require.Equal(t, map[string]string{
		"get-other":        "200", // task.scopes (anonymous could, too)
		"cancel-victim":    "200", // task.scopes only
		"cancel-other":     "403", // beyond task.scopes
		"report-completed": "403", // the claim's resolve scope is not authorized
		"create-artifact":  "200", // the one scope the proxy adds
	}, codes)

	body := func(label string) map[string]any {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(fetchArtifact(t, id, 0, "public/proxy/"+label+".json").body), &v), label)
		return v
	}
	require.Equal(t, idle, body("get-other")["taskQueueId"], "getTask replies with the task definition")
	for _, label := range []string{"cancel-other", "report-completed"} {
		require.Equal(t, "InsufficientScopes", body(label)["code"], label)
	}

	ctx := context.Background()
	vst := status(t, victim)
	require.Equal(t, tcclient.StateException, vst.State)
	require.Equal(t, "canceled", vst.Runs[0].ReasonResolved)
	require.Equal(t, tcclient.StatePending, status(t, other).State, "the refused cancel changed nothing")

	arts := artifactsByName(t, id, 0)
	require.Equal(t, tcclient.StorageReference, arts["public/via-proxy"].StorageType)
	red, err := shared.admin.GetArtifact(ctx, id, 0, "public/via-proxy")
	require.NoError(t, err)
	require.Equal(t, "https://example.com/via-proxy", red.URL)
}
