package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

const (
	taskA = "fN1SbArXTPSVFNUvaOlinQ"
	taskB = "aGQjzPjDTCGGZHZdHO9Jkw"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badYAML := writeFile(t, "bad.yml", "payload: [1, 2\n")
	tests := []struct {
		name    string
		args    []string
		vars    map[string]string // overrides; "" deletes
		wantMsg string
	}{
		{name: "no root url", args: []string{"status", taskA}, vars: map[string]string{"TASKCLUSTER_ROOT_URL": ""}, wantMsg: "TASKCLUSTER_ROOT_URL is not set"},
		{name: "bad root url", args: []string{"status", taskA}, vars: map[string]string{"TASKCLUSTER_ROOT_URL": "ftp://x"}, wantMsg: `TASKCLUSTER_ROOT_URL "ftp://x" is not an http(s) URL`},
		{name: "token without id", args: []string{"status", taskA}, vars: map[string]string{"TASKCLUSTER_ACCESS_TOKEN": "t"}, wantMsg: "TASKCLUSTER_CLIENT_ID is not"},
		{name: "id without token", args: []string{"status", taskA}, vars: map[string]string{"TASKCLUSTER_CLIENT_ID": "c"}, wantMsg: "TASKCLUSTER_ACCESS_TOKEN is not"},
		{name: "certificate alone", args: []string{"status", taskA}, vars: map[string]string{"TASKCLUSTER_CERTIFICATE": "{}"}, wantMsg: "TASKCLUSTER_CERTIFICATE is set without"},
		{name: "certificate not json", args: []string{"status", taskA},
			vars: map[string]string{"TASKCLUSTER_CLIENT_ID": "c", "TASKCLUSTER_ACCESS_TOKEN": "t", "TASKCLUSTER_CERTIFICATE": "{nope"}, wantMsg: "TASKCLUSTER_CERTIFICATE: certificate is not valid JSON"},
		{name: "bad task id beats missing env", args: []string{"status", "abc"}, vars: map[string]string{"TASKCLUSTER_ROOT_URL": ""}, wantMsg: `"abc" is not a valid taskId`},
		{name: "bad group id", args: []string{"group", "not-a-slug"}, wantMsg: `"not-a-slug" is not a valid taskGroupId`},
		{name: "missing task id", args: []string{"cancel"}, wantMsg: "task cancel needs TASKID"},
		{name: "missing artifact name", args: []string{"artifact", "get", taskA}, wantMsg: "needs NAME"},
		{name: "extra argument", args: []string{"rerun", taskA, taskB}, wantMsg: "takes 1 argument, got 2"},
		{name: "unknown flag", args: []string{"status", "--bogus", taskA}, wantMsg: "unknown flag: --bogus"},
		{name: "unknown command", args: []string{"frobnicate"}, wantMsg: `unknown command "frobnicate"`},
		{name: "no subcommand", args: nil, wantMsg: "needs a subcommand"},
		{name: "artifact without get", args: []string{"artifact"}, wantMsg: "needs a subcommand: get"},
		{name: "create without file", args: []string{"create"}, wantMsg: "needs -f FILE"},
		{name: "create unreadable file", args: []string{"create", "-f", filepath.Join(dir, "missing.yml")}, wantMsg: "cannot read " + filepath.Join(dir, "missing.yml") + ": no such file or directory"},
		{name: "create directory", args: []string{"create", "-f", dir}, wantMsg: "cannot read " + dir},
		{name: "create invalid yaml", args: []string{"create", "-f", badYAML}, wantMsg: "bad.yml: invalid YAML: yaml: line 1"},
		{name: "create bad queue", args: []string{"create", "-f", badYAML, "--task-queue-id", "x"}, wantMsg: "invalid YAML"},
		{name: "run without command", args: []string{"run"}, wantMsg: "needs a command to run"},
		{name: "run bad env", args: []string{"run", "--env", "NOEQUALS", "true"}, wantMsg: `--env "NOEQUALS": expected NAME=VALUE`},
		{name: "run bad queue", args: []string{"run", "--task-queue-id", "Upper/Case", "true"}, wantMsg: `"Upper/Case" is not a valid task queue id`},
		{name: "run zero max run time", args: []string{"run", "--max-run-time", "0", "true"}, wantMsg: "must be at least 1s"},
		{name: "log run with follow", args: []string{"log", "--follow", "--run", "1", taskA}, wantMsg: "--run cannot be combined with --follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Nothing listens here: usage errors must come before any call.
			h := newHarness(t, "http://127.0.0.1:1", nil)
			for k, v := range tt.vars {
				h.vars[k] = v
			}
			err := h.exec(context.Background(), tt.args...)
			require.Error(t, err)
			require.Equal(t, ExitUsage, exitCode(err), "error: %v", err)
			require.ErrorContains(t, err, tt.wantMsg)
			require.NotContains(t, err.Error(), "\n", "errors are one line")
		})
	}
}

func TestClientFromEnvironment(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "https://tc.example.com/", &tcclient.Credentials{ClientID: "me", AccessToken: "secret"})
	h.vars["TASKCLUSTER_CERTIFICATE"] = `{"version":1}`
	c, err := h.env.Client()
	require.NoError(t, err)
	require.Equal(t, "https://tc.example.com", c.RootURL)
	require.Equal(t, &tcclient.Credentials{ClientID: "me", AccessToken: "secret", Certificate: `{"version":1}`}, c.Credentials)

	anon := newHarness(t, "http://127.0.0.1:8080", nil)
	c, err = anon.env.Client()
	require.NoError(t, err)
	require.Nil(t, c.Credentials, "no client id means anonymous requests")
}

func TestCreate(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	h.env.Now = func() time.Time { return time.Now().Add(-time.Minute) }
	file := writeFile(t, "build.yaml", `
taskId: `+taskA+`
payload:
  command: [[make, test]]
  maxRunTime: 300
metadata:
  name: build
tags: {kind: test}
`)
	ctx := context.Background()
	require.NoError(t, h.exec(ctx, "create", "-f", file))
	require.Equal(t, "Task "+taskA+" created on hopper/default: pending\n"+fake.URL+"/ui/#/task/"+taskA+"\n", h.stdout.String())
	require.Empty(t, h.stderr.String(), "a payload the worker takes draws no warning")

	def, err := fake.Client(nil).Task(ctx, taskA)
	require.Error(t, err, "anonymous callers may not read tasks in the fake")
	cli, err := h.env.Client()
	require.NoError(t, err)
	def, err = cli.Task(ctx, taskA)
	require.NoError(t, err)
	require.Equal(t, "build", def.Metadata.Name)
	require.Equal(t, "Created with `hopper task create` from build.yaml.", def.Metadata.Description)
	require.Equal(t, "tester", def.Metadata.Owner)
	require.Equal(t, map[string]string{"kind": "test"}, def.Tags)
	require.JSONEq(t, `{"command":[["make","test"]],"maxRunTime":300}`, string(def.Payload))
	require.Equal(t, DefaultDeadline, def.Deadline.Sub(def.Created.Time))

	// Creating the same file again is idempotent only with the same
	// created time; a different one conflicts, reported in one line.
	h.env.Now = time.Now
	fake.InjectFault("createTask", http.StatusConflict)
	err = h.exec(ctx, "create", "-f", file)
	require.Equal(t, ExitFailed, exitCode(err))
	require.EqualError(t, err, "creating task "+taskA+": RequestConflict (HTTP 409): injected fault for createTask")
}

func TestCreateJSONFromStdin(t *testing.T) {
	t.Parallel()
	_, h := fakeSetup(t)
	h.env.Stdin = strings.NewReader(`{"payload": {"command": [["true"]], "maxRunTime": 5}, "taskQueueId": "proj/other"}`)
	require.NoError(t, h.exec(context.Background(), "--json", "create", "-f", "-", "--task-id", taskB))
	var out struct {
		TaskID string              `json:"taskId"`
		Status tcclient.TaskStatus `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.stdout.String()), &out))
	require.Equal(t, taskB, out.TaskID)
	require.Equal(t, "proj/other", out.Status.TaskQueueID)
	require.Equal(t, tcclient.StatePending, out.Status.State)
}

func TestStatusCancelRerun(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	ctx := context.Background()
	file := writeFile(t, "t.json", `{"taskId": "`+taskA+`", "payload": {}, "metadata": {"name": "the task"}}`)
	require.NoError(t, h.exec(ctx, "create", "-f", file))

	run := func(args ...string) string {
		t.Helper()
		h.stdout.Reset()
		require.NoError(t, h.exec(ctx, args...))
		return h.stdout.String()
	}

	out := run("status", taskA)
	require.Contains(t, out, "Task          "+taskA+"\nName          the task\nState         pending\nQueue         hopper/default\n")
	require.Contains(t, out, "RUN  STATE    CREATED    RESOLVED  WORKER  STARTED  DURATION\n0    pending  scheduled  -         -       -        -\n")

	var st statusOutput
	require.NoError(t, json.Unmarshal([]byte(run("status", "--json", taskA)), &st))
	require.Equal(t, tcclient.StatePending, st.Status.State)
	require.Equal(t, taskA, st.Status.TaskID)

	require.Equal(t, "Task "+taskA+": exception (run 0, canceled)\n", run("cancel", taskA))
	require.NoError(t, json.Unmarshal([]byte(run("rerun", "--json", taskA)), &st))
	require.Len(t, st.Status.Runs, 2)
	require.Equal(t, "rerun", st.Status.Runs[1].ReasonCreated)
	require.Equal(t, "Task "+taskA+": pending (run 1, rerun)\n", run("rerun", taskA))

	// API errors: the queue's code, status and first line of its message.
	err := h.exec(ctx, "status", taskB)
	require.Equal(t, ExitFailed, exitCode(err))
	require.EqualError(t, err, "getting status of task "+taskB+": ResourceNotFound (HTTP 404): task "+taskB+" not found")
	fake.InjectFault("cancelTask", http.StatusForbidden)
	err = h.exec(ctx, "cancel", taskA)
	require.EqualError(t, err, "cancelling task "+taskA+": InsufficientScopes (HTTP 403): injected fault for cancelTask")
}

func TestRenderStatus(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 10, 0, 0, time.UTC)
	at := func(min, sec int) tcclient.Time {
		return tcclient.NewTime(time.Date(2024, 5, 1, 12, min, sec, 0, time.UTC))
	}
	st := &tcclient.TaskStatus{
		TaskID: taskA, TaskQueueID: "hopper/default", TaskGroupID: taskB, State: tcclient.StateRunning,
		Deadline: at(59, 0), RetriesLeft: 4,
		Runs: []tcclient.Run{
			{RunID: 0, State: tcclient.StateException, ReasonCreated: "scheduled", ReasonResolved: "worker-shutdown",
				WorkerGroup: "local", WorkerID: "w1", Scheduled: at(0, 0), Started: at(0, 1), Resolved: at(1, 31)},
			{RunID: 1, State: tcclient.StateRunning, ReasonCreated: "retry", WorkerGroup: "local", WorkerID: "w2",
				Scheduled: at(1, 31), Started: at(9, 57)},
		},
	}
	def := &tcclient.TaskDefinition{Created: at(0, 0), Metadata: tcclient.TaskMetadata{Name: "build"}}
	var b strings.Builder
	require.NoError(t, RenderStatus(&b, st, def, now, false))
	require.Equal(t, `Task          fN1SbArXTPSVFNUvaOlinQ
Name          build
State         running
Queue         hopper/default
Group         aGQjzPjDTCGGZHZdHO9Jkw
Created       2024-05-01T12:00:00.000Z
Deadline      2024-05-01T12:59:00.000Z
Retries left  4

RUN  STATE      CREATED    RESOLVED         WORKER    STARTED                   DURATION
0    exception  scheduled  worker-shutdown  local/w1  2024-05-01T12:00:01.000Z  1m30s
1    running    retry      -                local/w2  2024-05-01T12:09:57.000Z  3s
`, b.String())

	// In colour the state cells are painted and the columns still line up.
	b.Reset()
	require.NoError(t, RenderStatus(&b, st, nil, now, true))
	lines := strings.Split(b.String(), "\n")
	require.Equal(t, "State         \x1b[36mrunning\x1b[0m", lines[1])
	header, row0, row1 := lines[7], lines[8], lines[9]
	require.Contains(t, row0, "0    \x1b[35mexception\x1b[0m  scheduled")
	require.Equal(t, "RUN  STATE      CREATED    RESOLVED         WORKER    STARTED                   DURATION", stripANSI(header))
	require.Equal(t, "0    exception  scheduled  worker-shutdown  local/w1  2024-05-01T12:00:01.000Z  1m30s", stripANSI(row0))
	require.Equal(t, "1    running    retry      -                local/w2  2024-05-01T12:09:57.000Z  3s", stripANSI(row1))

	b.Reset()
	require.NoError(t, RenderStatus(&b, &tcclient.TaskStatus{TaskID: taskA, State: tcclient.StateUnscheduled}, nil, now, false))
	require.True(t, strings.HasSuffix(b.String(), "\nNo runs yet.\n"), b.String())
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		1234 * time.Millisecond:      "1.2s",
		59*time.Second + 960*1e6:     "1m0s",
		90*time.Second + 400*1e6:     "1m30s",
		2*time.Hour + 3*time.Second:  "2h0m3s",
		40 * time.Millisecond:        "0s",
		12*time.Second + 5*1e7 + 1e6: "12.1s",
	} {
		require.Equal(t, want, formatDuration(d), d.String())
	}
}

// TestCreateWarnsAboutPayload: a payload hopper's worker would refuse is
// still created (the queue takes any payload, and another worker may run
// it) but draws a warning with each problem the worker would report.
func TestCreateWarnsAboutPayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, payload string
		want          []string
	}{
		{"command not a list of commands", "payload: {command: [make, test], maxRunTime: 300}", []string{"payload.command[0]: got string, want array"}},
		{"no maxRunTime", "payload: {command: [[make]]}", []string{"maxRunTime"}},
		{"docker payload without maxRunTime", "payload: {image: alpine, command: [true]}", []string{"maxRunTime"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, h := fakeSetup(t)
			file := writeFile(t, "task.yaml", tt.payload+"\nmetadata: {name: x}\n")
			require.NoError(t, h.exec(context.Background(), "create", "-f", file))
			require.Contains(t, h.stdout.String(), "created on hopper/default")
			require.Contains(t, h.stderr.String(), "warning: hopper's worker would refuse this payload")
			for _, w := range tt.want {
				require.Contains(t, h.stderr.String(), w)
			}
		})
	}
}
