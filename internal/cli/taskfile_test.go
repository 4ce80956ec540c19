package cli

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTaskDocument(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		want    string // JSON of the parsed document
		wantErr string
	}{
		{
			name:  "json keeps big numbers and nesting",
			input: `{"payload": {"maxRunTime": 600, "big": 123456789012345678901234567890}, "tags": {"a": "b"}}`,
			want:  `{"payload":{"big":123456789012345678901234567890,"maxRunTime":600},"tags":{"a":"b"}}`,
		},
		{
			name: "yaml scalars become JSON values",
			input: `
payload:
  command: [[echo, "hi"]]
  maxRunTime: 0x10
  ratio: 1.5
  on: true
  nothing: ~
created: 2024-05-01T12:00:00Z
`,
			want: `{"created":"2024-05-01T12:00:00Z","payload":{"command":[["echo","hi"]],"maxRunTime":16,"nothing":null,"on":true,"ratio":1.5}}`,
		},
		{
			name: "yaml timestamps keep the author's text",
			input: `deadline: 2024-05-01 12:00:00.5 +02:00
label: 2024-05-01
`,
			want: `{"deadline":"2024-05-01 12:00:00.5 +02:00","label":"2024-05-01"}`,
		},
		{
			name: "yaml anchors, aliases and merge keys",
			input: `
base: &base {owner: me@example.com, source: "https://example.com"}
metadata:
  <<: *base
  name: build
  owner: you@example.com
list: [*base]
`,
			want: `{"base":{"owner":"me@example.com","source":"https://example.com"},"list":[{"owner":"me@example.com","source":"https://example.com"}],"metadata":{"name":"build","owner":"you@example.com","source":"https://example.com"}}`,
		},
		{
			name:  "yaml integers beyond 64 bits",
			input: "n: 123456789012345678901234567890\nm: -9223372036854775808\nu: 18446744073709551615\n",
			want:  `{"m":-9223372036854775808,"n":123456789012345678901234567890,"u":18446744073709551615}`,
		},
		{
			name:  "byte order mark is ignored",
			input: "\xef\xbb\xbf{\"a\": 1}",
			want:  `{"a":1}`,
		},
		{name: "empty", input: " \n", wantErr: "task.yml is empty"},
		{name: "invalid yaml", input: "a: [1, 2\n", wantErr: "task.yml: invalid YAML: yaml: line 1"},
		{name: "invalid json", input: `{"a": }`, wantErr: "task.yml: invalid JSON: invalid character '}'"},
		{name: "json trailing data", input: `{"a": 1} {"b": 2}`, wantErr: "unexpected data after the top-level value"},
		{name: "yaml list at the top", input: "- a\n- b\n", wantErr: "must be a mapping (object), not a list"},
		{name: "yaml scalar at the top", input: "hello\n", wantErr: "not a string"},
		{name: "two yaml documents", input: "a: 1\n---\nb: 2\n", wantErr: "more than one YAML document"},
		{name: "non-string keys", input: "? [a, b]\n: c\n", wantErr: "mapping keys must be plain strings"},
		{name: "infinity", input: "a: .inf\n", wantErr: ".inf has no JSON representation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := ParseTaskDocument("task.yml", []byte(tt.input))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				var exit *ExitError
				require.True(t, errors.As(err, &exit))
				require.Equal(t, ExitUsage, exit.Code)
				return
			}
			require.NoError(t, err)
			got, err := json.Marshal(doc)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(got))
		})
	}
}

func TestFillDefaults(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	const (
		id1 = "fN1SbArXTPSVFNUvaOlinQ"
		id2 = "aGQjzPjDTCGGZHZdHO9Jkw"
	)
	base := Defaults{Now: now, RootURL: "http://q.example/", Name: "n", Description: "d", Owner: "o"}
	defaultMeta := map[string]any{"name": "n", "description": "d", "owner": "o", "source": "http://q.example/api/queue/v1/task/" + id1}
	tests := []struct {
		name    string
		doc     map[string]any
		over    func(*Defaults)
		want    map[string]any
		wantID  string
		wantErr string
	}{
		{
			name: "everything defaulted",
			doc:  map[string]any{"taskId": id1, "payload": map[string]any{}},
			want: map[string]any{
				"taskQueueId": DefaultTaskQueue, "created": "2024-05-01T12:00:00.123Z", "deadline": "2024-05-02T12:00:00.123Z",
				"payload": map[string]any{}, "metadata": defaultMeta,
			},
			wantID: id1,
		},
		{
			name: "flags override the file",
			doc: map[string]any{"taskId": id1, "provisionerId": "p", "workerType": "w", "payload": 1,
				"metadata": map[string]any{"name": "mine", "owner": ""}},
			over: func(d *Defaults) { d.TaskID, d.TaskQueueID = id2, "proj/builder" },
			want: map[string]any{
				"taskQueueId": "proj/builder", "created": "2024-05-01T12:00:00.123Z", "deadline": "2024-05-02T12:00:00.123Z",
				"payload": 1,
				"metadata": map[string]any{"name": "mine", "description": "d", "owner": "",
					"source": "http://q.example/api/queue/v1/task/" + id2},
			},
			wantID: id2,
		},
		{
			name: "file queue and times are kept, relative times resolved",
			doc: map[string]any{"taskId": id1, "provisionerId": "p", "workerType": "w", "payload": 1,
				"created": "2024-05-01T11:59:00Z", "deadline": "2 hours", "expires": "+1d"},
			want: map[string]any{
				"provisionerId": "p", "workerType": "w", "created": "2024-05-01T11:59:00.000Z",
				"deadline": "2024-05-01T14:00:00.123Z", "expires": "2024-05-02T12:00:00.123Z",
				"payload": 1, "metadata": defaultMeta,
			},
			wantID: id1,
		},
		{
			name: "null expires is left to the queue",
			doc:  map[string]any{"taskId": id1, "payload": 1, "expires": nil, "taskQueueId": "a/b"},
			want: map[string]any{
				"taskQueueId": "a/b", "created": "2024-05-01T12:00:00.123Z", "deadline": "2024-05-02T12:00:00.123Z",
				"payload": 1, "metadata": defaultMeta,
			},
			wantID: id1,
		},
		{name: "no payload", doc: map[string]any{"taskId": id1}, wantErr: "has no payload"},
		{name: "bad taskId in file", doc: map[string]any{"taskId": "nope", "payload": 1}, wantErr: `"nope" is not a valid taskId`},
		{name: "taskId not a string", doc: map[string]any{"taskId": json.Number("1"), "payload": 1}, wantErr: "taskId must be a string"},
		{name: "bad queue flag", doc: map[string]any{"payload": 1}, over: func(d *Defaults) { d.TaskQueueID = "Nope" }, wantErr: `"Nope" is not a valid task queue id`},
		{name: "bad time", doc: map[string]any{"payload": 1, "deadline": "tomorrow"}, wantErr: `deadline: "tomorrow" is neither`},
		{name: "time not a string", doc: map[string]any{"payload": 1, "created": json.Number("5")}, wantErr: "created must be a date-time string"},
		{name: "metadata not a mapping", doc: map[string]any{"payload": 1, "metadata": "x"}, wantErr: "metadata must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := base
			if tt.over != nil {
				tt.over(&d)
			}
			id, err := FillDefaults(tt.doc, d)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantID, id)
			require.Equal(t, tt.want, tt.doc)
		})
	}
}

func TestFillDefaultsGeneratesTaskIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 20 {
		doc := map[string]any{"payload": 1}
		id, err := FillDefaults(doc, Defaults{Now: time.Now()})
		require.NoError(t, err)
		require.Regexp(t, slugIDPattern, id)
		require.False(t, seen[id], "taskIds must be fresh")
		seen[id] = true
		require.Equal(t, "/api/queue/v1/task/"+id, doc["metadata"].(map[string]any)["source"])
	}
}

func TestParseRelative(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "1 day", want: 24 * time.Hour},
		{in: "2 hours 30 minutes", want: 150 * time.Minute},
		{in: "+1d2h", want: 26 * time.Hour},
		{in: "-5 min", want: -5 * time.Minute},
		{in: "90m", want: 90 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "  3 Weeks ", want: 21 * 24 * time.Hour},
		{in: "1 year", want: 365 * 24 * time.Hour},
		{in: "1mo", want: 30 * 24 * time.Hour},
		{in: "10 s", want: 10 * time.Second},
		{in: "", wantErr: "empty offset"},
		{in: "-", wantErr: "empty offset"},
		{in: "3 fortnights", wantErr: `unknown unit "fortnights"`},
		{in: "soon", wantErr: `cannot read "soon"`},
		{in: "99999999999 days", wantErr: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRelative(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRunPayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    RunOptions
		want    string
		wantErr string
	}{
		{
			name: "command only",
			opts: RunOptions{Command: []string{"echo", "hello world"}, MaxRunTime: 600 * time.Second},
			want: `{"command":[["echo","hello world"]],"maxRunTime":600}`,
		},
		{
			name: "env and artifacts",
			opts: RunOptions{Command: []string{"make"}, MaxRunTime: 1500 * time.Millisecond,
				Env: []string{"A=1", "B=x=y", "EMPTY="}, Artifacts: []string{"out/report.txt", "/tmp/abs.bin", "../up.txt"}},
			want: `{"command":[["make"]],"maxRunTime":2,"env":{"A":"1","B":"x=y","EMPTY":""},
				"artifacts":[{"type":"file","path":"out/report.txt","name":"public/out/report.txt"},
				{"type":"file","path":"/tmp/abs.bin","name":"public/abs.bin"},
				{"type":"file","path":"../up.txt","name":"public/up.txt"}]}`,
		},
		{name: "no command", opts: RunOptions{MaxRunTime: time.Second}, wantErr: "needs a command"},
		{name: "zero max run time", opts: RunOptions{Command: []string{"x"}}, wantErr: "--max-run-time must be at least 1s"},
		{name: "env without =", opts: RunOptions{Command: []string{"x"}, MaxRunTime: time.Second, Env: []string{"A"}}, wantErr: `--env "A": expected NAME=VALUE`},
		{name: "env without name", opts: RunOptions{Command: []string{"x"}, MaxRunTime: time.Second, Env: []string{"=1"}}, wantErr: "expected NAME=VALUE"},
		{name: "artifact twice", opts: RunOptions{Command: []string{"x"}, MaxRunTime: time.Second, Artifacts: []string{"a.txt", "./a.txt"}}, wantErr: "given twice"},
		{name: "artifact dot", opts: RunOptions{Command: []string{"x"}, MaxRunTime: time.Second, Artifacts: []string{"."}}, wantErr: "does not name a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := RunPayload(tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			raw, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(raw))
		})
	}
}

func TestShellQuoteAndTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, `echo 'hello world' 'it'\''s' a=b ''`, shellQuote([]string{"echo", "hello world", "it's", "a=b", ""}))
	require.Equal(t, "abc", truncate("abc", 3))
	require.Equal(t, "ab…", truncate("abcdef", 5))
	// "é" is two bytes: the cut must not split it.
	require.Equal(t, "a…", truncate("aééé", 5))
}

func TestSecondsValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "600", want: 600 * time.Second},
		{in: "10m", want: 600 * time.Second},
		{in: "1.2s", want: 2 * time.Second},
		{in: "0", wantErr: "at least 1s"},
		{in: "500ms", wantErr: "at least 1s"},
		{in: "soon", wantErr: "neither seconds nor a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var v secondsValue
			err := v.Set(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, time.Duration(v))
		})
	}
	v := secondsValue(600 * time.Second)
	require.Equal(t, "600s", v.String())
}
