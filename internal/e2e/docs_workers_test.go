package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestWorkersGuideExamples runs docs/workers.md's examples: the worker's
// command as written (its work dir swapped for a temporary one) runs a
// task; the log ends with the resources line the guide shows, in its
// shape (where the worker reads cgroups: as root); and, as root, a worker
// with the guide's sandbox config file runs one too.
func TestWorkersGuideExamples(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	env := srv.Env()
	work := t.TempDir()
	e2e.DocShell{Env: env, Replace: []string{"/var/lib/hopper-worker", work}}.Start(t, e2e.DocExample(t, "workers-run"))

	runTask := func(queue string) string {
		t.Helper()
		out, errOut, code := hopperCLI(t, env, "task", "run", "--task-queue-id", queue, "--", "sh", "-c", "echo from the guide worker")
		require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
		require.Contains(t, out, "from the guide worker")
		return regexp.MustCompile(`Task (\S+) created`).FindStringSubmatch(errOut)[1]
	}
	id := runTask("hopper/default")

	if os.Geteuid() == 0 {
		log, errOut, code := hopperCLI(t, env, "task", "log", id)
		require.Equal(t, 0, code, errOut)
		sample := strings.TrimSpace(e2e.DocExample(t, "workers-resources-line").Text)
		// The sample's shape: its words, any time and any figures.
		shape := regexp.MustCompile(`\d{4}-\d\d-\d\dT[\d:.]+Z`).ReplaceAllString(sample, "TIME")
		shape = regexp.MustCompile(`\d+(\.\d+)?`).ReplaceAllString(shape, "NUM")
		shape = strings.NewReplacer("TIME", `\S+`, "NUM", `\d+(\.\d+)?`).Replace(regexp.QuoteMeta(shape))
		require.Regexp(t, "(?m)^"+shape+"$", log)

		// Task users must reach the work dir: one of root's own, outside
		// the test's private temporary directory.
		strictWork, err := os.MkdirTemp("", "hopper-guide-strict-")
		require.NoError(t, err)
		require.NoError(t, os.Chmod(strictWork, 0o711))
		t.Cleanup(func() { _ = os.RemoveAll(strictWork) })
		cfg := filepath.Join(t.TempDir(), "worker.yaml")
		require.NoError(t, os.WriteFile(cfg, []byte(e2e.DocExample(t, "workers-sandbox-config").Text), 0o600))
		worker := exec.Command(e2e.Binary(t), "worker", "--config", cfg, "--task-queue-id", "guide/strict", "--work-dir", strictWork)
		worker.Env = append(os.Environ(), env...)
		logs := &e2e.SyncBuffer{}
		worker.Stdout, worker.Stderr = logs, logs
		require.NoError(t, worker.Start())
		t.Cleanup(func() {
			_ = worker.Process.Signal(syscall.SIGTERM)
			_ = worker.Wait()
			if t.Failed() {
				t.Logf("the strict worker's output:\n%s", logs.String())
			}
		})
		runTask("guide/strict")
	}
}

// TestWorkersGuideSuperseding runs docs/workers.md's superseding example
// as written: four builds of one coalescing key queued, then the guide's
// worker started on their queue runs the newest and resolves the older
// ones exception/superseded.
func TestWorkersGuideSuperseding(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx := context.Background()
	example := e2e.DocExample(t, "workers-supersede")
	create, worker := example, example
	cut := strings.LastIndex(strings.TrimRight(example.Text, "\n"), "\n")
	create.Text, worker.Text = example.Text[:cut+1], example.Text[cut+1:]
	dir := t.TempDir()
	out, err := e2e.DocShell{Dir: dir, Env: srv.Env()}.Run(t, create)
	require.NoError(t, err, out)
	var builds []string
	for _, m := range regexp.MustCompile(`Task (\S+) created`).FindAllStringSubmatch(out, -1) {
		builds = append(builds, m[1])
	}
	require.Len(t, builds, 4, out)
	e2e.DocShell{Env: srv.Env(), Replace: []string{"/tmp/demo-worker", t.TempDir()}}.Start(t, worker)
	state := func(id string) *tcclient.TaskStatus {
		st, err := q.Status(ctx, id)
		require.NoError(t, err)
		return st
	}
	testclock.WaitFor(t, 2*time.Minute, "build 4 completes", func() bool { return state(builds[3]).State == tcclient.StateCompleted })
	for _, id := range builds[:3] {
		testclock.WaitFor(t, time.Minute, "an older build superseded", func() bool {
			st := state(id)
			return st.State == tcclient.StateException && st.Runs[0].ReasonResolved == "superseded"
		})
	}
}
