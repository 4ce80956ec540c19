package workere2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi/dockertest"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// BenchmarkTaskLatencyByEngine measures one task's life through a running
// worker, from createTask until the queue has it resolved, for a task that
// prints one line: with the process engine and with the docker engine.
// The difference is what the container costs per task (image check,
// create, start, log attach, wait, copy-out and removal). The process
// engine runs twice more: with isolation none (plain child processes) and
// with the strict sandbox (task user, namespaces, cgroup), whose
// difference is the sandbox's cost per task, once with the default
// outbound task network (slirp4netns started per task) and once with
// taskNetwork none.
func BenchmarkTaskLatencyByEngine(b *testing.B) {
	if shared == nil {
		b.Skip("needs the hopper binaries; not run with -short")
	}
	engines := []struct {
		name    string
		payload map[string]any
	}{
		{"process", map[string]any{"command": [][]string{{"echo", "first line"}}, "maxRunTime": 60}},
		{"process-none", map[string]any{"command": [][]string{{"echo", "first line"}}, "maxRunTime": 60}},
		{"process-strict", map[string]any{"command": [][]string{{"echo", "first line"}}, "maxRunTime": 60}},
		{"process-netnone", map[string]any{"command": [][]string{{"echo", "first line"}}, "maxRunTime": 60}},
		{"docker", map[string]any{"image": busyboxImage, "command": []string{"echo", "first line"}, "maxRunTime": 60}},
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			queue := uniqueQueue("bench-" + e.name)
			cfg := map[string]any{
				"rootUrl":       shared.rootURL,
				"credentials":   map[string]string{"clientId": rootClientID, "accessToken": shared.token},
				"taskQueueId":   queue,
				"workerGroup":   "e2e",
				"workerId":      "bench-" + e.name,
				"workDir":       filepath.Join(reachableDir(b), "work"),
				"claimInterval": "10ms",
			}
			switch e.name {
			case "process-none":
				cfg["isolation"] = "none"
			case "process-strict", "process-netnone":
				if reason := strictSandboxMissing(b); reason != "" {
					b.Skip(reason)
				}
				cfg["isolation"] = "strict"
				if e.name == "process-netnone" {
					cfg["taskNetwork"] = "none"
				}
			}
			if e.name == "docker" {
				if m := dockertest.Missing(); m != "" {
					b.Skip("needs Docker: " + m)
				}
				d, err := startSharedDocker()
				require.NoError(b, err)
				cfg["engine"] = "docker"
				cfg["docker"] = map[string]any{"host": d.Host}
			}
			raw, err := json.Marshal(cfg)
			require.NoError(b, err)
			path := filepath.Join(b.TempDir(), "worker.json")
			require.NoError(b, os.WriteFile(path, raw, 0o600))
			// Its log stays out of the benchmark's output.
			cmd := exec.Command(shared.bin, "worker", "--config", path, "--log-level", "error")
			require.NoError(b, cmd.Start())
			// SIGTERM, so the worker removes its cgroups on the way out.
			b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
			ctx := context.Background()
			b.ResetTimer()
			var total time.Duration
			poll := time.NewTicker(5 * time.Millisecond)
			defer poll.Stop()
			for i := 0; i < b.N; i++ {
				raw, err := json.Marshal(e.payload)
				require.NoError(b, err)
				now := time.Now()
				id := tcclient.NewTaskID()
				_, err = shared.admin.CreateTask(ctx, id, &tcclient.TaskDefinition{
					TaskQueueID: queue, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
					Payload:  raw,
					Metadata: tcclient.TaskMetadata{Name: "bench", Description: "engine latency", Owner: "e2e@example.com", Source: "https://example.com/e2e"},
				})
				require.NoError(b, err)
				// Status every 5 ms, a fixed poll: the measure's resolution.
				for range poll.C {
					st, err := shared.admin.Status(ctx, id)
					require.NoError(b, err)
					if st.State == tcclient.StateCompleted {
						break
					}
					require.NotEqual(b, tcclient.StateFailed, st.State)
					require.NotEqual(b, tcclient.StateException, st.State)
				}
				total += time.Since(now)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/task")
		})
	}
}
