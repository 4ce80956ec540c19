package auth

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

const createTaskTemplate = `{"AllOf": [
	{"for": "scope", "in": "scopes", "each": "<scope>"},
	{"for": "route", "in": "routes", "each": "queue:route:<route>"},
	"queue:create-task:project:<projectId>",
	"queue:scheduler-id:<schedulerId>",
	{"AnyOf": [{"for": "priority", "in": "priorities", "each": "queue:create-task:<priority>:<provisionerId>/<workerType>"}]}
]}`

func TestTemplateRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template string
		params   map[string]any
		want     string // JSON; "" means renders to nothing
	}{
		{
			name:     "createTask",
			template: createTaskTemplate,
			params: map[string]any{
				"scopes": []string{"secrets:get:x"}, "routes": []any{"index.a", "index.b"},
				"projectId": "none", "schedulerId": "-", "priorities": []string{"highest", "very-high", "high"},
				"provisionerId": "p", "workerType": "w",
			},
			want: `{"AllOf":["secrets:get:x","queue:route:index.a","queue:route:index.b","queue:create-task:project:none","queue:scheduler-id:-",{"AnyOf":["queue:create-task:highest:p/w","queue:create-task:very-high:p/w","queue:create-task:high:p/w"]}]}`,
		},
		{
			name:     "getArtifact",
			template: `{"AllOf": [{"for": "name", "in": "names", "each": "queue:get-artifact:<name>"}]}`,
			params:   map[string]any{"names": []string{"private/a", "private/b"}},
			want:     `{"AllOf":["queue:get-artifact:private/a","queue:get-artifact:private/b"]}`,
		},
		{
			name:     "empty for contributes nothing",
			template: `{"AllOf": [{"for": "name", "in": "names", "each": "queue:get-artifact:<name>"}]}`,
			params:   map[string]any{"names": []string{}},
			want:     `{"AllOf":[]}`,
		},
		{
			name:     "createClient",
			template: `{"AllOf": ["auth:create-client:<clientId>", {"for": "scope", "in": "scopes", "each": "<scope>"}]}`,
			params:   map[string]any{"clientId": "a/b", "scopes": []string{"x", "y*"}},
			want:     `{"AllOf":["auth:create-client:a/b","x","y*"]}`,
		},
		{
			name:     "numbers render in decimal",
			template: `"queue:resolve-task:<taskId>/<runId>"`,
			params:   map[string]any{"taskId": "abc", "runId": 0},
			want:     `"queue:resolve-task:abc/0"`,
		},
		{
			name:     "json numbers and floats",
			template: `"x:<a>:<b>:<c>"`,
			params:   map[string]any{"a": json.Number("12"), "b": 1.5, "c": int64(7)},
			want:     `"x:12:1.5:7"`,
		},
		{
			name:     "absent parameter renders empty",
			template: `"x:<missing>:y"`,
			params:   nil,
			want:     `"x::y"`,
		},
		{
			name:     "unknown placeholder syntax is literal",
			template: `"x:<1a>:<..>:<a-b>"`,
			params:   map[string]any{},
			want:     `"x:<1a>:<..>:<a-b>"`,
		},
		{
			name:     "if true",
			template: `{"if": "public", "then": {"AllOf": []}, "else": "queue:get-artifact:<name>"}`,
			params:   map[string]any{"public": true, "name": "x"},
			want:     `{"AllOf":[]}`,
		},
		{
			name:     "if false else",
			template: `{"if": "public", "then": {"AllOf": []}, "else": "queue:get-artifact:<name>"}`,
			params:   map[string]any{"public": false, "name": "x"},
			want:     `"queue:get-artifact:x"`,
		},
		{
			name:     "root if false without else renders nothing",
			template: `{"if": "public", "then": "a"}`,
			params:   map[string]any{"public": false},
			want:     "",
		},
		{
			name:     "nested if false is dropped",
			template: `{"AnyOf": ["a", {"if": "x", "then": "b"}, {"if": "y", "then": {"AnyOf": ["c"]}}]}`,
			params:   map[string]any{"x": false, "y": true},
			want:     `{"AnyOf":["a",{"AnyOf":["c"]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl, err := ParseTemplate([]byte(tt.template))
			require.NoError(t, err)
			got, ok, err := tmpl.Render(tt.params)
			require.NoError(t, err)
			if tt.want == "" {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			raw, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(raw))
		})
	}
}

func TestTemplateRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		template string
		params   map[string]any
		want     string
	}{
		{`"a:<x>"`, map[string]any{"x": true}, "scope expression template expected parameter 'x' to be a string, number, or undefined"},
		{`"a:<x>"`, map[string]any{"x": nil}, "scope expression template expected parameter 'x' to be a string, number, or undefined"},
		{`{"AllOf": [{"for": "n", "in": "ns", "each": "<n>"}]}`, map[string]any{"ns": "x"}, "scope expression template expected parameter 'ns' to be a array"},
		{`{"AllOf": [{"for": "n", "in": "ns", "each": "<n>"}]}`, map[string]any{}, "scope expression template expected parameter 'ns' to be a array"},
		{`{"AllOf": [{"for": "n", "in": "ns", "each": "<n>"}]}`, map[string]any{"ns": []any{true}}, "scope expression template expected parameter 'n' to be a string, number, or undefined"},
		{`{"if": "p", "then": "a"}`, map[string]any{"p": "true"}, "scope expression template expected parameter 'p' to be a boolean"},
	}
	for _, tt := range tests {
		tmpl := MustParseTemplate(tt.template)
		_, _, err := tmpl.Render(tt.params)
		require.EqualError(t, err, tt.want, tt.template)
	}
}

func TestTemplateValidation(t *testing.T) {
	t.Parallel()
	invalid := []string{
		`5`, `null`, `["a"]`, `{}`,
		`{"for": "a", "in": "b", "each": "<a>"}`, // not a root
		`{"AllOf": [{"for": "a", "in": "b", "each": {"AllOf": []}}]}`,
		`{"AllOf": [{"for": "1a", "in": "b", "each": "x"}]}`,
		`{"AllOf": [{"for": "a", "in": "b", "each": "x", "extra": 1}]}`,
		`{"if": "p", "then": {"for": "a", "in": "b", "each": "x"}}`,
		`{"if": "p-q", "then": "a"}`,
		`{"if": "p", "then": "a", "else": 5}`,
		`{"AllOf": "a"}`,
		`{"AllOf": ["a"], "AnyOf": ["b"]}`,
		`"a" "b"`,
	}
	for _, s := range invalid {
		_, err := ParseTemplate([]byte(s))
		require.Error(t, err, s)
	}
	_, err := ParseTemplate([]byte(`{"AllOf": ["<x>", {"if": "x", "then": "a"}]}`))
	require.EqualError(t, err, "parameter x cannot be both 'boolean' and 'string'")
	require.Panics(t, func() { MustParseTemplate(`5`) })
}

func TestTemplateParams(t *testing.T) {
	t.Parallel()
	tmpl := MustParseTemplate(createTaskTemplate)
	require.Equal(t, map[string]ParamType{
		"scopes": ParamArray, "routes": ParamArray, "priorities": ParamArray,
		"projectId": ParamString, "schedulerId": ParamString, "provisionerId": ParamString, "workerType": ParamString,
	}, tmpl.Params())
	require.False(t, tmpl.RendersFrom("projectId", "schedulerId", "provisionerId", "workerType"))

	status := MustParseTemplate(`{"AllOf": ["queue:status:<taskId>"]}`)
	require.True(t, status.RendersFrom("taskId"))
	require.False(t, status.RendersFrom("runId"))

	resolve := MustParseTemplate(`{"AnyOf": ["queue:resolve-task:<taskId>/<runId>", {"AllOf": ["queue:resolve-task", "assume:worker-id:<workerGroup>/<workerId>"]}]}`)
	require.False(t, resolve.RendersFrom("taskId", "runId"))
	require.True(t, resolve.RendersFrom("taskId", "runId", "workerGroup", "workerId"))

	cond := MustParseTemplate(`{"if": "public", "then": "a"}`)
	require.Equal(t, map[string]ParamType{"public": ParamBool}, cond.Params())
	require.False(t, cond.RendersFrom("public"))

	public := MustParseTemplate(`"queue:ping"`)
	require.True(t, public.RendersFrom())
}
