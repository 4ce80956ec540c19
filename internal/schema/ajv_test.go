package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTaskclusterWording checks the failures worded as Taskcluster's ajv
// words them: its own tests and its users match on these sentences.
func TestTaskclusterWording(t *testing.T) {
	t.Parallel()
	r := setup(t)
	hook := func(edit func(map[string]any)) string {
		body := map[string]any{
			"metadata": map[string]any{"name": "n", "description": "d", "owner": "o@example.com"},
			"task":     map[string]any{},
		}
		edit(body)
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		return string(raw)
	}
	tests := []struct {
		name, schema, body string
		want               []string
	}{
		{name: "required in an array item", schema: "create-hook-request",
			body: hook(func(b map[string]any) { b["bindings"] = []any{map[string]any{"exchange": "e"}} }),
			want: []string{"data/bindings/0 must have required property 'routingKeyPattern'"}},
		{name: "type", schema: "create-hook-request",
			body: hook(func(b map[string]any) { b["bindings"] = map[string]any{"exchange": "e", "routingKeyPattern": "#"} }),
			want: []string{"data/bindings must be array"}},
		{name: "several, sorted", schema: "create-task-request",
			body: taskBody(func(b map[string]any) {
				b["retries"] = 99
				b["routes"] = []any{""}
				b["bogus"] = true
				b["priority"] = "urgent"
			}),
			want: []string{
				`data must NOT have additional properties: "bogus"`,
				"data/priority must be equal to one of the allowed values",
				"data/retries must be <= 49",
				"data/routes/0 must NOT have fewer than 1 characters",
			}},
		{name: "pattern", schema: "create-task-request",
			body: taskBody(func(b map[string]any) { b["taskQueueId"] = "nope" }),
			want: []string{`data/taskQueueId must match pattern "^[a-zA-Z0-9-_]{1,38}/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Validate(tt.schema, []byte(tt.body))
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tt.want, verr.Taskcluster)
			require.Contains(t, verr.TaskclusterText(), "Schema Validation Failed!\nRejecting Schema: "+tt.schema+"\nErrors:\n  * "+tt.want[0])
		})
	}
}

// TestTaskclusterWordingOfUserSchemas checks a hook's triggerSchema: plain
// ajv, which does not name the additional property.
func TestTaskclusterWordingOfUserSchemas(t *testing.T) {
	t.Parallel()
	u, err := CompileUser([]byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"additionalProperties":false}`))
	require.NoError(t, err)
	err = u.Validate([]byte(`{"n":0,"x":1}`))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "data must NOT have additional properties; data/n must be >= 1", verr.TaskclusterSummary())
}

// TestHeaderValuesRefuseControlCharacters: content types travel in HTTP
// headers and cache names are stored as text, where PostgreSQL cannot keep
// a NUL, so control characters are refused by the schema on every store.
func TestHeaderValuesRefuseControlCharacters(t *testing.T) {
	t.Parallel()
	r := setup(t)
	tests := []struct{ name, schema, body string }{
		{"s3 artifact", "post-artifact-request", `{"storageType":"s3","expires":"2030-01-01T00:00:00Z","contentType":"text/\u0000plain"}`},
		{"reference artifact", "post-artifact-request", `{"storageType":"reference","expires":"2030-01-01T00:00:00Z","url":"https://example.com","contentType":"a\r\nb"}`},
		{"object artifact", "post-artifact-request", `{"storageType":"object","expires":"2030-01-01T00:00:00Z","contentType":"a\u007f"}`},
		{"dataInline", "object-create-upload-request", `{"projectId":"p","uploadId":"fN1gHwxWQJmjsxJyHD-ZwA","expires":"2030-01-01T00:00:00Z","proposedUploadMethods":{"dataInline":{"contentType":"a\u0000","objectData":""}}}`},
		{"putUrl", "object-create-upload-request", `{"projectId":"p","uploadId":"fN1gHwxWQJmjsxJyHD-ZwA","expires":"2030-01-01T00:00:00Z","proposedUploadMethods":{"putUrl":{"contentType":"a\nb","contentLength":1}}}`},
		{"cache name", "purge-cache-request", `{"cacheName":"c\u0000"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Validate(tt.schema, []byte(tt.body))
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			// Like ajv, every alternative of a oneOf is reported.
			require.Contains(t, verr.TaskclusterText(), ` must match pattern "^[^\x00-\x1f\x7f]*$"`)
		})
	}
	_, err := r.Validate("post-artifact-request", []byte(`{"storageType":"s3","expires":"2030-01-01T00:00:00Z","contentType":"text/plain; charset=utf-8"}`))
	require.NoError(t, err)
}

// TestTextRefusesNUL: descriptions are stored as text, where PostgreSQL
// cannot keep a NUL (it answered 500), so the schemas refuse one on every
// store; other control characters (newlines in Markdown) stay allowed.
func TestTextRefusesNUL(t *testing.T) {
	t.Parallel()
	r := setup(t)
	tests := []struct{ schema, body string }{
		{"create-client-request", `{"description":"a\u0000","expires":"2030-01-01T00:00:00Z"}`},
		{"update-client-request", `{"description":"a\u0000","expires":"2030-01-01T00:00:00Z"}`},
		{"create-role-request", `{"description":"a\u0000","scopes":[]}`},
		{"declare-provisioner-request", `{"description":"a\u0000"}`},
		{"declare-worker-type-request", `{"description":"a\u0000"}`},
		{"quarantine-worker-request", `{"quarantineUntil":"2030-01-01T00:00:00Z","quarantineInfo":"a\u0000"}`},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			t.Parallel()
			_, err := r.Validate(tt.schema, []byte(tt.body))
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Contains(t, verr.TaskclusterText(), ` must match pattern "^[^\x00]*$"`)
			_, err = r.Validate(tt.schema, []byte(strings.ReplaceAll(tt.body, `\u0000`, `\n\tb`)))
			require.NoError(t, err, "newlines and tabs are fine")
		})
	}
}
