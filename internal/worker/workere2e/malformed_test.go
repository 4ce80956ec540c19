package workere2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestBadPayloadsAreMalformed gives a real worker one payload per kind of
// bad field. Each must end exception/malformed-payload without running
// anything, and the backing log (the run's only log) must say which field
// is wrong and why, in words a task author can act on (docs/contract/worker.md §1.6,
// §2). The worker pool caps maxRunTime at 600 s and disables the proxy so
// that the pool-dependent checks are exercised too.
func TestBadPayloadsAreMalformed(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	queue := uniqueQueue("malformed")
	cmd := [][]string{{"sh", "-c", "echo SHOULD-NOT-RUN"}}
	// with returns a valid payload with the given fields replaced (a nil
	// value removes the field).
	with := func(fields map[string]any) map[string]any {
		pl := map[string]any{"command": cmd, "maxRunTime": 60}
		for k, v := range fields {
			if v == nil {
				delete(pl, k)
				continue
			}
			pl[k] = v
		}
		return pl
	}
	file := func(fields map[string]any) []map[string]any {
		a := map[string]any{"type": "file", "path": "out.txt", "name": "public/out.txt"}
		for k, v := range fields {
			if v == nil {
				delete(a, k)
				continue
			}
			a[k] = v
		}
		return []map[string]any{a}
	}
	raw := map[string]any{"raw": "hello"}
	cases := []struct {
		name    string
		payload map[string]any
		// want are substrings the log must contain: where, and what.
		want []string
	}{
		{"missing command", with(map[string]any{"command": nil}),
			[]string{"payload: missing property 'command'"}},
		{"missing maxRunTime", with(map[string]any{"maxRunTime": nil}),
			[]string{"payload: missing property 'maxRunTime'"}},
		{"command is a single argv", with(map[string]any{"command": []string{"echo", "hi"}}),
			[]string{"payload.command[0]: got string, want array"}},
		{"command is empty", with(map[string]any{"command": [][]string{}}),
			[]string{"payload.command: minItems: got 0, want 1"}},
		{"empty argv", with(map[string]any{"command": [][]string{{}}}),
			[]string{"payload.command[0]: minItems: got 0, want 1"}},
		{"argv holds a number", with(map[string]any{"command": []any{[]any{"echo", 1}}}),
			[]string{"payload.command[0][1]: got number, want string"}},
		{"env value not a string", with(map[string]any{"env": map[string]any{"DEBUG": 1}}),
			[]string{"payload.env.DEBUG: got number, want string"}},
		{"maxRunTime zero", with(map[string]any{"maxRunTime": 0}),
			[]string{"payload.maxRunTime: minimum: got 0, want 1"}},
		{"maxRunTime string", with(map[string]any{"maxRunTime": "60"}),
			[]string{"payload.maxRunTime: got string, want integer"}},
		{"maxRunTime above the pool's limit", with(map[string]any{"maxRunTime": 601}),
			[]string{"payload.maxRunTime 601 exceeds this worker pool's maximum of 600 seconds"}},
		{"unknown top-level property", with(map[string]any{"maxRuntime": 60}),
			[]string{"payload: additional properties 'maxRuntime' not allowed"}},
		{"artifact without path", with(map[string]any{"artifacts": file(map[string]any{"path": nil})}),
			[]string{"payload.artifacts[0]: missing property 'path'"}},
		{"artifact of unknown type", with(map[string]any{"artifacts": file(map[string]any{"type": "folder"})}),
			[]string{"payload.artifacts[0].type: value must be one of 'file', 'directory'"}},
		{"artifact expires not a date", with(map[string]any{"artifacts": file(map[string]any{"expires": "tomorrow"})}),
			[]string{"payload.artifacts[0].expires: 'tomorrow' is not valid date-time"}},
		{"artifact expires after the task", with(map[string]any{"artifacts": file(map[string]any{"expires": "2199-01-01T00:00:00.000Z"})}),
			[]string{"payload.artifacts[0].expires (2199-01-01", "is after the task expiry"}},
		{"file mount with an archive format", with(map[string]any{"mounts": []any{map[string]any{"file": "f", "content": raw, "format": "tar.gz"}}}),
			[]string{"payload.mounts[0].format: value must be one of"}},
		{"file mount with an unsupported format", with(map[string]any{"mounts": []any{map[string]any{"file": "f", "content": raw, "format": "lz4"}}}),
			[]string{`payload.mounts[0]: decompression format "lz4" is not supported by this worker`}},
		{"file mount at a path that cannot exist", with(map[string]any{"mounts": []any{map[string]any{"file": "/proc/hopper-no-such/x", "content": raw}}}),
			[]string{"payload.mounts[0]: creating parent of /proc/hopper-no-such/x"}},
		{"cache without its scope", with(map[string]any{"mounts": []any{map[string]any{"directory": "c", "cacheName": "builds"}}}),
			[]string{`payload.mounts[0]: writable cache "builds" requires scope generic-worker:cache:builds`}},
		{"mount content from a non-dependency", with(map[string]any{"mounts": []any{map[string]any{"file": "f",
			"content": map[string]any{"taskId": "fN1kP2mMS0aRNuEt5a3mpA", "artifact": "public/x"}}}}),
			[]string{"payload.mounts[0]: content comes from task fN1kP2mMS0aRNuEt5a3mpA, which must be listed in task.dependencies"}},
		{"onExitStatus.retry with 0", with(map[string]any{"onExitStatus": map[string]any{"retry": []int{0}}}),
			[]string{"payload.onExitStatus.retry[0]: minimum: got 0, want 1"}},
		{"unknown feature", with(map[string]any{"features": map[string]any{"gpu": true}}),
			[]string{"payload.features: additional properties 'gpu' not allowed"}},
		{"feature disabled on the pool", with(map[string]any{"features": map[string]any{"taskclusterProxy": true}}),
			[]string{"features.taskclusterProxy is requested but the taskcluster proxy is disabled on worker pool " + queue}},
		{"unsupported feature", with(map[string]any{"features": map[string]any{"loopbackVideo": true}}),
			[]string{"features.loopbackVideo is not supported by this worker"}},
		{"keep-alive too long", with(map[string]any{"features": map[string]any{"interactive": true}, "interactive": map[string]any{"keepAlive": 86401}}),
			[]string{"payload.interactive.keepAlive"}},
		{"supersederUrl not http(s)", with(map[string]any{"supersederUrl": "ftp://example.com/list"}),
			[]string{"payload.supersederUrl: 'ftp://example.com/list' does not match pattern"}},
		{"docker-worker payload", with(map[string]any{"image": "ubuntu:24.04"}),
			[]string{`the payload has an "image" property, i.e. it is a docker-worker payload`}},
		{"every schema problem at once", map[string]any{
			"command": "echo hi", "maxRunTime": "1h", "env": map[string]any{"X": true}, "colour": "blue",
			"artifacts":    []any{map[string]any{"type": "file"}},
			"onExitStatus": map[string]any{"retry": []int{0}},
			"features":     map[string]any{"gpu": true},
		}, []string{
			"payload.command: got string, want array", "payload.maxRunTime: got string, want integer",
			"payload.env.X: got boolean, want string", "payload: additional properties 'colour' not allowed",
			"payload.artifacts[0]: missing property 'path'", "payload.onExitStatus.retry[0]: minimum",
			"payload.features: additional properties 'gpu' not allowed",
			"The payload failed validation (7 problem(s), listed above).",
		}},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = createTaskWith(t, queue, c.payload, nil)
	}
	w := startWorkerWith(t, queue, workerOpts{id: "malformed", tasks: len(cases), config: map[string]any{
		"capacity": 4, "maxTaskRunTime": 600, "enableTaskclusterProxy": false,
	}})
	require.Equal(t, 0, w.wait(t, 60*time.Second))

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			id := ids[i]
			st := status(t, id)
			log := backingLog(t, id, -1)
			require.Equal(t, tcclient.StateException, st.State, "log:\n%s", log)
			require.Len(t, st.Runs, 1, "malformed-payload is final: no retry")
			require.Equal(t, tcclient.ReasonMalformedPayload, st.Runs[0].ReasonResolved)
			for _, want := range c.want {
				require.Contains(t, log, want)
			}
			require.Contains(t, log, "Task resolution: exception/malformed-payload: ")
			require.NotContains(t, log, "SHOULD-NOT-RUN\n", "nothing runs for a malformed payload")
			require.NotContains(t, log, "Executing command")
			for name, a := range artifactsByName(t, id, 0) {
				switch name {
				case "public/logs/live_backing.log":
					require.Equal(t, tcclient.StorageS3, a.StorageType)
				case "public/logs/live.log":
					// No live log ran; the name leads to the backing log.
					require.Equal(t, tcclient.StorageLink, a.StorageType)
				default:
					require.Failf(t, "unexpected artifact", "%s (%s)", name, a.StorageType)
				}
			}
			if strings.Contains(c.name, "artifact") {
				require.NotContains(t, artifactsByName(t, id, 0), "public/out.txt")
			}
		})
	}
}
