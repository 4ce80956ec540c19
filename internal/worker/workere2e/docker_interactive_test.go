package workere2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestDockerInteractiveShell: with the docker engine a shell is a
// `docker exec` in the task's container: while the command runs, and
// after it ended in a container made from the stopped one (its files as
// the command left them), for the payload's keep-alive; cancelling the
// task ends it, and no container or image is left.
func TestDockerInteractiveShell(t *testing.T) {
	t.Parallel()
	queue := uniqueQueue("docker-shell")
	id := createTaskWith(t, queue, dockerPayload(`echo made by the command > /tmp/note; until [ -f /tmp/go-on ]; do sleep 0.1; done; exit 3`, func(pl map[string]any) {
		pl["features"] = map[string]bool{"interactive": true}
		pl["interactive"] = map[string]int{"keepAlive": 600}
	}), nil)
	w := startDockerWorker(t, queue, workerOpts{id: "docker-shell", tasks: 1})
	sh := openShell(t, shared.admin, id)
	sh.send(t, `echo "task=$TASK_ID note=$(cat /tmp/note)"; touch /tmp/go-on`)
	sh.await(t, "task="+id+" note=made by the command")
	// The command ends; the shell ends with its container, and a shell
	// opened then runs in the kept-alive one.
	select {
	case <-sh.exit:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the first shell outlived its container; output: %s", sh.output())
	}
	waitLiveLog(t, id, "the task stays alive")
	kept := openShell(t, shared.admin, id)
	kept.send(t, `echo "again=$TASK_ID note=$(cat /tmp/note) go=$(ls /tmp/go-on)"`)
	kept.await(t, "again="+id+" note=made by the command go=/tmp/go-on")
	kept.send(t, "exit 6")
	select {
	case code := <-kept.exit:
		require.Equal(t, 6, code)
	case <-time.After(2 * time.Minute):
		t.Fatalf("the shell did not end; output: %s", kept.output())
	}
	require.Equal(t, tcclient.StateRunning, status(t, id).State, "the task stays alive for its keep-alive")
	_, err := shared.admin.CancelTask(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 0, w.wait(t, 2*time.Minute))
	require.Equal(t, tcclient.StateException, status(t, id).State)
	testclock.WaitFor(t, time.Minute, "the task's containers to be removed", func() bool { return len(containersOf(t, labelTask, id+"/0")) == 0 })
	_, err = needDocker(t).Client.InspectImage(context.Background(), "hopper-interactive:"+strings.ToLower(id)+"-0")
	require.True(t, dockerapi.IsNotFound(err), "the kept-alive image was removed: %v", err)
}
