package e2e_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// The guides' images made with `docker import`, run as written against a
// private dockerd (DOCKER_HOST names it, for the docker CLI and for
// `hopper worker`): docs/workers.md's busybox image and its docker task
// here, docs/worker-pools.md's image of the static binary in
// TestDockerPoolScales (hopperImage).

var createdTaskID = regexp.MustCompile(`Task ([A-Za-z0-9_-]{22}) created`)

// TestWorkersGuideDockerEngine: docs/workers.md's docker example imports
// a busybox image, queues the task, and its worker command (the work
// directory swapped for a temporary one) runs it; the task's log and
// artifact are what the guide says.
func TestWorkersGuideDockerEngine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	if m := dockertest.Missing(); m != "" {
		t.Skip(m)
	}
	d, err := dockertest.Start()
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	env := append(srv.Env(), "DOCKER_HOST="+d.Host)

	out, err := e2e.DocShell{Env: env}.Run(t, e2e.DocExample(t, "workers-docker-image"))
	require.NoError(t, err, "the guide's image and task:\n%s", out)
	m := createdTaskID.FindStringSubmatch(out)
	require.NotNil(t, m, "the guide's task create prints the taskId:\n%s", out)
	taskID := m[1]

	e2e.DocShell{Env: env, Replace: []string{"/tmp/demo-docker", t.TempDir()}}.Start(t, e2e.DocExample(t, "workers-docker-worker"))
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitForRun(t, ctx, q, taskID, 0, tcclient.StateCompleted, 3*time.Minute)

	log, errOut, code := hopperCLI(t, srv.Env(), "task", "log", taskID)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, log, "hello from "+taskID)
	answer, errOut, code := hopperCLI(t, srv.Env(), "task", "artifact", "get", taskID, "public/answer.txt")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "42\n", answer)
}
