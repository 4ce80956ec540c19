package schema

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestBounds: what the largest body valid against a schema holds, by
// keyword; parts the schema leaves open are Unbounded.
func TestBounds(t *testing.T) {
	t.Parallel()
	const u = Unbounded
	tests := []struct {
		name, schema string
		want         Bounds
	}{
		{"closed object", `{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"additionalProperties":false}`,
			// {"a":"xyz"}, every character escaped: 2 + "a" 3×12 + 3×12+2 + 2
			Bounds{Bytes: 78, Values: 3, Depth: 1}},
		{"anchored pattern", `{"type":"string","pattern":"^[a-z]{1,5}$"}`, Bounds{Bytes: 5*12 + 2, Values: 1}},
		{"alternatives anchored", `{"type":"string","pattern":"^ab$|^(c|def)$"}`, Bounds{Bytes: 3*12 + 2, Values: 1}},
		{"unanchored pattern", `{"type":"string","pattern":"[a-z]{1,5}"}`, Bounds{Bytes: u, Values: 1}},
		{"repeated without end", `{"type":"string","pattern":"^a+$"}`, Bounds{Bytes: u, Values: 1}},
		{"date-time", `{"type":"string","format":"date-time"}`, Bounds{Bytes: dateTimeChars*12 + 2, Values: 1}},
		{"array of at most 4", `{"type":"array","items":{"type":"boolean"},"maxItems":4}`, Bounds{Bytes: 2 + 4*6, Values: 5, Depth: 1}},
		{"array without maxItems", `{"type":"array","items":{"type":"boolean"}}`, Bounds{Bytes: u, Values: u, Depth: 1}},
		{"tuple", `{"type":"array","items":[{"type":"boolean"},{"type":"null"}],"additionalItems":false}`, Bounds{Bytes: 2 + 2*6, Values: 3, Depth: 1}},
		{"open object", `{"type":"object"}`, Bounds{Bytes: u, Values: u, Depth: u}},
		{"maxProperties", `{"type":"object","additionalProperties":{"type":"string","maxLength":1},"maxProperties":2}`,
			// Keys of any length: bytes open; values and depth bounded.
			Bounds{Bytes: u, Values: 1 + 2*2, Depth: 1}},
		{"anyOf: the larger", `{"anyOf":[{"type":"string","maxLength":1},{"type":"array","items":{"type":"null"},"maxItems":2}]}`,
			Bounds{Bytes: 14, Values: 3, Depth: 1}},
		{"allOf: the smaller", `{"allOf":[{"type":"array","items":{"type":"null"},"maxItems":3},{"type":"array","items":{"type":"null"},"maxItems":1}]}`,
			Bounds{Bytes: 2 + 6, Values: 2, Depth: 1}},
		{"no type: anything", `{"maxLength":2}`, Bounds{Bytes: u, Values: u, Depth: u}},
		{"enum", `{"enum":["ab",[1,2]]}`, Bounds{Bytes: 5 * 12, Values: 3, Depth: 1}},
		{"recursion", `{"definitions":{"node":{"type":"object","properties":{"child":{"$ref":"#/definitions/node"}},"additionalProperties":false}},"$ref":"#/definitions/node"}`,
			Bounds{Bytes: u, Values: u, Depth: u}},
	}
	files := fstest.MapFS{}
	for i, tt := range tests {
		files[string(rune('a'+i))+".json"] = &fstest.MapFile{Data: []byte(`{"$schema":"http://json-schema.org/draft-06/schema#",` + tt.schema[1:])}
	}
	r, err := newRegistry(files)
	require.NoError(t, err)
	for i, tt := range tests {
		got, err := r.Bounds(string(rune('a' + i)))
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, got, tt.name)
	}
	_, err = r.Bounds("nope")
	require.ErrorAs(t, err, new(*UnknownSchemaError))
}

// TestBoundsOfRequestSchemas: the embedded schemas of small bodies are
// bounded (and a valid body of each is within its bounds, counted as the
// request reader counts).
func TestBoundsOfRequestSchemas(t *testing.T) {
	t.Parallel()
	r, err := New()
	require.NoError(t, err)
	for _, tt := range []struct {
		schema, body string
	}{
		{"claim-work-request", `{"workerGroup":"` + strings.Repeat("g", 38) + `","workerId":"w","tasks":32}`},
		{"task-exception-request", `{"reason":"resource-unavailable"}`},
		{"declare-worker-request", `{"expires":"2030-01-02T03:04:05.123456789+01:00"}`},
	} {
		b, err := r.Bounds(tt.schema)
		require.NoError(t, err)
		_, err = r.Validate(tt.schema, []byte(tt.body))
		require.NoError(t, err, tt.schema)
		var s Scanner
		s.Feed([]byte(tt.body))
		require.LessOrEqual(t, int64(len(tt.body)), b.Bytes, tt.schema)
		require.LessOrEqual(t, int64(s.Values), b.Values, tt.schema)
		require.LessOrEqual(t, int64(s.MaxDepth), b.Depth, tt.schema)
		require.Less(t, b.Bytes, int64(4096), tt.schema)
	}
}
