package schema

import (
	"encoding/json"
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
