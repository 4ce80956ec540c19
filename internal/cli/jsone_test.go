package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJSONERender(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	yamlTemplate := write("task.yaml", "taskId: ${taskId}\ndeadline: {$fromNow: '1 day'}\nn: {$eval: 'len(items)'}\n")
	jsonContext := write("context.json", `{"taskId": "abc", "items": [1, 2, 3]}`)
	yamlContext := write("context.yaml", "taskId: abc\nitems: [1, 2]\n")
	badTemplate := write("bad.json", `{"a": {"$eval": "missing"}}`)
	listContext := write("list.json", `[1]`)

	tests := []struct {
		name     string
		args     []string
		stdin    string
		want     string
		wantCode int
		wantErr  string
	}{
		{name: "yaml template, json context", args: []string{"-t", yamlTemplate, "-c", jsonContext, "--now", "2017-01-19T16:27:20.974Z"},
			want: "{\n  \"deadline\": \"2017-01-20T16:27:20.974Z\",\n  \"n\": 3,\n  \"taskId\": \"abc\"\n}\n"},
		{name: "yaml context", args: []string{"-t", yamlTemplate, "-c", yamlContext, "--now", "2017-01-19T16:27:20Z"},
			want: "{\n  \"deadline\": \"2017-01-20T16:27:20.000Z\",\n  \"n\": 2,\n  \"taskId\": \"abc\"\n}\n"},
		{name: "template from stdin", args: []string{"-t", "-"}, stdin: `{"$json": {"b": "<&>", "a": 1}}`,
			want: "\"{\\\"a\\\":1,\\\"b\\\":\\\"<&>\\\"}\"\n"},
		{name: "render error", args: []string{"-t", badTemplate}, wantCode: ExitFailed,
			wantErr: "rendering " + badTemplate + ": InterpreterError at template.a: unknown context value missing"},
		{name: "context must be a mapping", args: []string{"-t", yamlTemplate, "-c", listContext}, wantCode: ExitUsage,
			wantErr: "the context must be a mapping (object), not a list"},
		{name: "bad now", args: []string{"-t", yamlTemplate, "--now", "tomorrow"}, wantCode: ExitUsage, wantErr: `--now "tomorrow" is not an RFC 3339 date-time`},
		{name: "missing file", args: []string{"-t", filepath.Join(dir, "nope.yaml")}, wantCode: ExitUsage, wantErr: "no such file"},
		{name: "empty stdin", args: []string{"-t", "-"}, wantCode: ExitUsage, wantErr: "- is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := NewJSONECommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetIn(strings.NewReader(tt.stdin))
			cmd.SetArgs(append([]string{"render"}, tt.args...))
			err := cmd.Execute()
			if tt.wantErr != "" {
				var exit *ExitError
				require.True(t, errors.As(err, &exit), "error %v", err)
				require.Equal(t, tt.wantCode, exit.Code)
				require.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, out.String())
		})
	}
}
