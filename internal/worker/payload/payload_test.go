package payload_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/worker/payload"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	v, err := payload.NewValidator()
	require.NoError(t, err)
	p, problems := v.Parse(json.RawMessage(`{
		"command": [["sh", "-c", "echo hi"]],
		"maxRunTime": 30,
		"env": {"A": "b"},
		"artifacts": [{"type": "file", "path": "out/result.txt"}],
		"mounts": [
			{"file": "x.txt", "content": {"raw": "hello"}},
			{"directory": "d", "content": {"url": "https://example.com/a.tar.gz"}, "format": "tar.gz"},
			{"directory": "c", "cacheName": "npm"}
		],
		"features": {"liveLog": false},
		"onExitStatus": {"retry": [36], "purgeCaches": [0]},
		"supersederUrl": "https://superseder.example.com/v1/list/1/2/key"
	}`))
	require.Empty(t, problems)
	require.Equal(t, [][]string{{"sh", "-c", "echo hi"}}, p.Command)
	require.True(t, p.Features.BackingLog)
	require.False(t, p.Features.LiveLog)
	require.False(t, p.Features.TaskclusterProxy)
	require.Equal(t, payload.DefaultBackingLogName, p.Logs.Backing)
	require.Equal(t, payload.DefaultLiveLogName, p.Logs.Live)
	require.Equal(t, "out/result.txt", p.Artifacts[0].Name)
	require.Equal(t, []string{payload.MountFile, payload.MountDirectory, payload.MountCache},
		[]string{p.Mounts[0].Kind, p.Mounts[1].Kind, p.Mounts[2].Kind})
	require.Equal(t, "hello", *p.Mounts[0].Content.Raw)
	require.Equal(t, []int{36}, p.OnExitStatus.Retry)
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	v, err := payload.NewValidator()
	require.NoError(t, err)
	tests := []struct {
		name    string
		payload string
		want    []string // substrings, each must appear in some explanation
	}{
		{name: "empty", payload: ``, want: []string{"no payload"}},
		{name: "not JSON", payload: `{"command":`, want: []string{"not valid JSON"}},
		{name: "missing required", payload: `{}`, want: []string{"payload: missing properties", "command", "maxRunTime"}},
		{name: "unknown property", payload: `{"command":[["true"]],"maxRunTime":1,"bogus":1}`,
			want: []string{"payload: additional properties 'bogus' not allowed"}},
		{name: "command must be argv arrays", payload: `{"command":["echo hi"],"maxRunTime":1}`,
			want: []string{"payload.command[0]: got string, want array"}},
		{name: "maxRunTime type and range", payload: `{"command":[["true"]],"maxRunTime":0}`,
			want: []string{"payload.maxRunTime: minimum: got 0, want 1"}},
		{name: "env values are strings", payload: `{"command":[["true"]],"maxRunTime":1,"env":{"N":1}}`,
			want: []string{"payload.env.N: got number, want string"}},
		{name: "artifact type", payload: `{"command":[["true"]],"maxRunTime":1,"artifacts":[{"type":"dir","path":"x"}]}`,
			want: []string{"payload.artifacts[0].type: value must be one of 'file', 'directory'"}},
		{name: "artifact without path", payload: `{"command":[["true"]],"maxRunTime":1,"artifacts":[{"type":"file"}]}`,
			want: []string{"payload.artifacts[0]: missing property 'path'"}},
		{name: "cache content without format", payload: `{"command":[["true"]],"maxRunTime":1,"mounts":[{"directory":"d","cacheName":"c","content":{"raw":"x"}}]}`,
			want: []string{"payload.mounts[0]: properties 'format' required, if 'content' exists"}},
		{name: "bad base64", payload: `{"command":[["true"]],"maxRunTime":1,"mounts":[{"file":"f","content":{"base64":"!!"}}]}`,
			want: []string{"payload.mounts[0].content.base64: '!!' does not match pattern"}},
		{name: "bad sha256", payload: `{"command":[["true"]],"maxRunTime":1,"mounts":[{"file":"f","content":{"url":"https://x/y","sha256":"ABC"}}]}`,
			want: []string{"payload.mounts[0].content.sha256"}},
		{name: "superseder URL", payload: `{"command":[["true"]],"maxRunTime":1,"supersederUrl":"ftp://x"}`,
			want: []string{"payload.supersederUrl: 'ftp://x' does not match pattern"}},
		{name: "docker-worker payload", payload: `{"image":"ubuntu","command":["true"],"maxRunTime":1}`,
			want: []string{"docker-worker payload"}},
		{name: "exit status lists", payload: `{"command":[["true"]],"maxRunTime":1,"onExitStatus":{"retry":[0]}}`,
			want: []string{"payload.onExitStatus.retry[0]: minimum: got 0, want 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, problems := v.Parse(json.RawMessage(tt.payload))
			require.Nil(t, p)
			require.NotEmpty(t, problems)
			for _, w := range tt.want {
				found := false
				for _, pr := range problems {
					if strings.Contains(pr, w) {
						found = true
					}
				}
				require.Truef(t, found, "%q not in %q", w, problems)
			}
		})
	}
}

func TestDefaultLogsOnly(t *testing.T) {
	t.Parallel()
	logs, backing := payload.DefaultLogsOnly(json.RawMessage(`{"logs":{"backing":"private/b.log"},"features":{"backingLog":true},"bogus":1}`))
	require.Equal(t, "private/b.log", logs.Backing)
	require.Equal(t, payload.DefaultLiveLogName, logs.Live)
	require.True(t, backing)
	logs, backing = payload.DefaultLogsOnly(json.RawMessage(`[1,2]`))
	require.Equal(t, payload.DefaultBackingLogName, logs.Backing)
	require.True(t, backing)
}
