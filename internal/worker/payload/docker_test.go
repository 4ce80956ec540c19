package payload_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/worker/payload"
)

func TestParseDockerValid(t *testing.T) {
	t.Parallel()
	v, err := payload.NewValidator()
	require.NoError(t, err)
	p, problems := v.ParseDocker(json.RawMessage(`{
		"image": "ubuntu:24.04",
		"command": ["/bin/bash", "-c", "echo hi"],
		"maxRunTime": 30,
		"env": {"A": "b"},
		"artifacts": {"public/build": {"type": "directory", "path": "/build", "expires": "2030-01-02T03:04:05.000Z"}},
		"cache": {"level-3-checkouts": "/checkouts"},
		"capabilities": {"privileged": true, "devices": {"kvm": true, "hostSharedMemory": false}},
		"features": {"localLiveLog": false, "taskclusterProxy": true},
		"onExitStatus": {"retry": [36], "purgeCaches": [72]},
		"supersederUrl": "https://superseder.example.com/v1/list/1/2/key"
	}`))
	require.Empty(t, problems)
	require.Equal(t, payload.DockerImage{Type: payload.ImageRegistry, Name: "ubuntu:24.04"}, p.Image)
	require.Equal(t, []string{"/bin/bash", "-c", "echo hi"}, p.Command)
	require.False(t, p.Features.LocalLiveLog)
	require.True(t, p.Features.BulkLog, "defaults to true")
	require.True(t, p.Features.Artifacts, "defaults to true")
	require.True(t, p.Features.TaskclusterProxy)
	require.Equal(t, payload.DefaultLiveLogName, p.Log)
	require.Equal(t, "/build", p.Artifacts["public/build"].Path)
	require.Equal(t, 2030, p.Artifacts["public/build"].Expires.Year())
	require.Equal(t, []string{"kvm"}, p.Capabilities.RequestedDevices())
	require.Equal(t, []int{72}, p.OnExitStatus.PurgeCaches)
}

func TestParseDockerImageForms(t *testing.T) {
	t.Parallel()
	v, err := payload.NewValidator()
	require.NoError(t, err)
	tests := []struct {
		image string
		want  payload.DockerImage
	}{
		{`"busybox"`, payload.DockerImage{Type: payload.ImageRegistry, Name: "busybox"}},
		{`{"type": "docker-image", "name": "busybox:1"}`, payload.DockerImage{Type: payload.ImageNamed, Name: "busybox:1"}},
		{`{"type": "indexed-image", "namespace": "a.b.c", "path": "public/image.tar.zst"}`,
			payload.DockerImage{Type: payload.ImageIndexed, Namespace: "a.b.c", Path: "public/image.tar.zst"}},
		{`{"type": "task-image", "taskId": "fN1SbArXTPSVFNUvaOlinQ", "path": "public/image.tar"}`,
			payload.DockerImage{Type: payload.ImageTask, TaskID: "fN1SbArXTPSVFNUvaOlinQ", Path: "public/image.tar"}},
	}
	for _, tt := range tests {
		t.Run(tt.want.Type, func(t *testing.T) {
			p, problems := v.ParseDocker(json.RawMessage(`{"image": ` + tt.image + `, "maxRunTime": 1}`))
			require.Empty(t, problems)
			require.Equal(t, tt.want, p.Image)
		})
	}
}

func TestParseDockerProblems(t *testing.T) {
	t.Parallel()
	v, err := payload.NewValidator()
	require.NoError(t, err)
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{"empty", ``, "has no payload"},
		{"not json", `{`, "not valid JSON"},
		{"no image", `{"maxRunTime": 1}`, "payload: missing property 'image'"},
		{"no maxRunTime", `{"image": "x"}`, "missing property 'maxRunTime'"},
		{"generic-worker payload", `{"command": [["true"]], "maxRunTime": 1}`, "it is a generic-worker payload"},
		{"dind", `{"image": "x", "maxRunTime": 1, "features": {"dind": true}}`, "payload.features.dind: docker-in-docker is not supported"},
		{"unknown feature", `{"image": "x", "maxRunTime": 1, "features": {"telepathy": true}}`, "telepathy"},
		{"task-image without taskId", `{"image": {"type": "task-image", "path": "p"}, "maxRunTime": 1}`, "payload.image"},
		{"relative artifact path", `{"image": "x", "maxRunTime": 1, "artifacts": {"a": {"type": "file", "path": "rel"}}}`, "payload.artifacts.a.path"},
		{"relative cache mount point", `{"image": "x", "maxRunTime": 1, "cache": {"c": "rel"}}`, "payload.cache.c"},
		{"command of arrays", `{"image": "x", "maxRunTime": 1, "command": [["a"]]}`, "payload.command[0]"},
		{"bad superseder url", `{"image": "x", "maxRunTime": 1, "supersederUrl": "ftp://x"}`, "payload.supersederUrl"},
		{"zero maxRunTime", `{"image": "x", "maxRunTime": 0}`, "payload.maxRunTime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, problems := v.ParseDocker(json.RawMessage(tt.payload))
			require.Nil(t, p)
			require.NotEmpty(t, problems)
			require.Contains(t, strings.Join(problems, "\n"), tt.want)
		})
	}
}

func TestDockerLogNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, live, backing string }{
		{`{}`, "public/logs/live.log", "public/logs/live_backing.log"},
		{`{"log": "apple/banana.log.txt"}`, "apple/banana.log.txt", "apple/banana.log_backing.txt"},
		{`{"log": "public/noext"}`, "public/noext", "public/noext_backing"},
		{`{"log": "public/.hidden"}`, "public/.hidden", "public/.hidden_backing"},
		{`{"log": 7}`, "public/logs/live.log", "public/logs/live_backing.log"},
		{`not json`, "public/logs/live.log", "public/logs/live_backing.log"},
	}
	for _, tt := range tests {
		logs := payload.DockerLogs(json.RawMessage(tt.raw))
		require.Equal(t, payload.Logs{Live: tt.live, Backing: tt.backing}, logs, tt.raw)
	}
}
