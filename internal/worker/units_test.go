package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

func TestReclaimAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		remaining time.Duration
		wantEarly time.Duration // takenUntil − ReclaimAt
	}{
		{name: "production 20-minute claim: 3 minutes early", remaining: 20 * time.Minute, wantEarly: 3 * time.Minute},
		{name: "exactly 6 minutes: both rules agree", remaining: 6 * time.Minute, wantEarly: 3 * time.Minute},
		{name: "4-minute claim: half-way", remaining: 4 * time.Minute, wantEarly: 2 * time.Minute},
		{name: "2-second test claim: half-way", remaining: 2 * time.Second, wantEarly: time.Second},
		{name: "already expired: now", remaining: -time.Second, wantEarly: -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			takenUntil := now.Add(tt.remaining)
			at := ReclaimAt(now, takenUntil)
			require.Equal(t, tt.wantEarly, takenUntil.Sub(at))
			require.False(t, at.Before(now))
		})
	}
}

func TestContentTypeAndEncoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path, explicitType, explicitEnc string
		wantType, wantEnc               string
	}{
		{path: "public/logs/build.log", wantType: "text/plain; charset=utf-8", wantEnc: "gzip"},
		{path: "events.jsonl", wantType: "application/jsonl", wantEnc: "gzip"},
		{path: "x/report.json", wantType: "application/json", wantEnc: "gzip"},
		{path: "page.HTML", wantType: "text/html; charset=utf-8", wantEnc: "gzip"},
		{path: "bundle.tar.gz", wantEnc: "identity"}, // type comes from the host MIME table
		{path: "image.PNG", wantType: "image/png", wantEnc: "identity"},
		{path: "target.zst", wantEnc: "identity"},
		{path: "noext", wantType: "application/octet-stream", wantEnc: "gzip"},
		{path: "weird.unknownext", wantType: "application/octet-stream", wantEnc: "gzip"},
		{path: "a.txt", explicitType: "text/x-custom", explicitEnc: "identity", wantType: "text/x-custom", wantEnc: "identity"},
		{path: "a.zip", explicitEnc: "gzip", explicitType: "application/zip", wantType: "application/zip", wantEnc: "gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			if tt.wantType != "" {
				require.Equal(t, tt.wantType, ContentTypeFor(tt.path, tt.explicitType))
			}
			require.Equal(t, tt.wantEnc, ContentEncodingFor(tt.path, tt.explicitEnc))
		})
	}
}

func TestExpandArtifacts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"out/a.txt", "out/sub/b.json", "single.log"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644))
	}
	expires := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	custom := tcclient.NewTime(time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	got := ExpandArtifacts(dir, []payload.Artifact{
		{Type: "directory", Path: "out", Name: "public/build/"},
		{Type: "file", Path: "single.log", Name: "public/single.log", Expires: custom},
		{Type: "file", Path: "nope.txt", Name: "public/nope.txt"},
		{Type: "file", Path: "nope2.txt", Name: "public/nope2.txt", Optional: true},
		{Type: "file", Path: "out", Name: "public/out-as-file"},
		{Type: "directory", Path: "single.log", Name: "public/file-as-dir"},
		{Type: "file", Path: filepath.Join(dir, "out/a.txt"), Name: "public/abs.txt"},
	}, expires)
	type row struct{ name, reason, file string }
	var rows []row
	for _, u := range got {
		rows = append(rows, row{u.name, u.errReason, strings.TrimPrefix(u.file, dir)})
		if u.name == "public/single.log" {
			require.Equal(t, custom.Time, u.expires)
		} else {
			require.Equal(t, expires, u.expires)
		}
		require.Equal(t, u.errReason != "", u.failure != nil)
	}
	require.Equal(t, []row{
		{"public/abs.txt", "", "/out/a.txt"},
		{"public/build/a.txt", "", "/out/a.txt"},
		{"public/build/sub/b.json", "", "/out/sub/b.json"},
		{"public/file-as-dir", tcclient.ArtifactInvalidResource, ""},
		{"public/nope.txt", tcclient.ArtifactFileMissing, ""},
		{"public/out-as-file", tcclient.ArtifactInvalidResource, ""},
		{"public/single.log", "", "/single.log"},
	}, rows)
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	require.Equal(t, `sh -c 'echo "hi"; it'\''s'`, shellQuote([]string{"sh", "-c", `echo "hi"; it's`}))
	require.Equal(t, `ls -la /tmp ''`, shellQuote([]string{"ls", "-la", "/tmp", ""}))
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		errs  []runErr
		want  Outcome
		caseA bool
	}{
		{want: Outcome{State: tcclient.StateCompleted}, caseA: true},
		{errs: []runErr{failure("x"), malformed("y")}, want: Outcome{State: tcclient.StateFailed}, caseA: true},
		{errs: []runErr{malformed("y"), failure("x")}, want: Outcome{State: tcclient.StateException, Reason: tcclient.ReasonMalformedPayload}},
		{errs: []runErr{{reason: tcclient.ReasonIntermittentTask}}, want: Outcome{State: tcclient.StateException, Reason: tcclient.ReasonIntermittentTask}, caseA: true},
		{errs: []runErr{{failed: true, aborted: true}}, want: Outcome{State: tcclient.StateFailed, Aborted: true}},
	}
	for _, tt := range tests {
		r := &taskRun{errs: tt.errs}
		got := r.outcome()
		require.Equal(t, tt.want, got)
		require.Equal(t, tt.caseA, got.TaskCodeConcluded())
	}
	require.False(t, Outcome{Lost: true}.TaskCodeConcluded())
}

func TestConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yamlPath := filepath.Join(dir, "w.yaml")
	require.NoError(t, os.WriteFile(yamlPath, []byte(`
rootUrl: https://tc.example.com/
credentials: {clientId: c, accessToken: t}
provisionerId: prov
workerType: wt
workerGroup: g
workerId: w
claimInterval: 250ms
shutdownUploadTimeout: 30
enableLiveLog: false
superseding: {order: descending, timeout: 2s}
`), 0o600))
	cfg, err := LoadConfigFile(yamlPath)
	require.NoError(t, err)
	n, err := cfg.Normalize()
	require.NoError(t, err)
	require.Equal(t, "https://tc.example.com", n.RootURL)
	require.Equal(t, "prov/wt", n.TaskQueueID)
	require.Equal(t, 250*time.Millisecond, n.ClaimInterval.Duration)
	require.Equal(t, 30*time.Second, n.ShutdownUploadTimeout.Duration)
	require.Equal(t, 1, n.Capacity)
	require.Equal(t, 86400, n.MaxTaskRunTime)
	require.False(t, boolOr(n.EnableLiveLog, true))
	require.Equal(t, "descending", n.Superseding.Order)
	require.True(t, n.SupersedingEnabled())
	require.True(t, filepath.IsAbs(n.TasksDir))

	jsonPath := filepath.Join(dir, "w.json")
	require.NoError(t, os.WriteFile(jsonPath, []byte(`{"rootUrl":"http://x","taskQueueId":"p/w","workerGroup":"g","workerId":"w","credentials":{"clientId":"c","accessToken":"t"},"capacity":3}`), 0o600))
	cfg, err = LoadConfigFile(jsonPath)
	require.NoError(t, err)
	n, err = cfg.Normalize()
	require.NoError(t, err)
	require.Equal(t, 3, n.Capacity)

	require.NoError(t, os.WriteFile(jsonPath, []byte(`{"rootUrl":"http://x","typo":1}`), 0o600))
	_, err = LoadConfigFile(jsonPath)
	require.ErrorContains(t, err, "typo")

	_, err = Config{RootURL: "http://x", TaskQueueID: "p/Bad_Type", WorkerGroup: "g", WorkerID: "w!"}.Normalize()
	require.ErrorContains(t, err, "taskQueueId")
	require.ErrorContains(t, err, "workerId")
	require.ErrorContains(t, err, "credentials")
}
