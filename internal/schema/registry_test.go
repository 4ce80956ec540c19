package schema

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestNewRegistryRefusesBrokenSchemas(t *testing.T) {
	t.Parallel()
	const draft = `"$schema": "http://json-schema.org/draft-06/schema#"`
	cases := []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{
			name:  "NoFiles",
			files: fstest.MapFS{"README.md": {Data: []byte("x")}},
			want:  "no schema files found",
		},
		{
			name:  "InvalidJSON",
			files: fstest.MapFS{"a.json": {Data: []byte(`{` + draft + `,`)}},
			want:  "decoding schema file a.json",
		},
		{
			name:  "OtherDialect",
			files: fstest.MapFS{"a.json": {Data: []byte(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}`)}},
			want:  `schema file a.json: $schema must be`,
		},
		{
			name:  "MissingDialect",
			files: fstest.MapFS{"a.json": {Data: []byte(`{"type": "object"}`)}},
			want:  `schema file a.json: $schema must be`,
		},
		{
			name:  "NotASchema",
			files: fstest.MapFS{"a.json": {Data: []byte(`{` + draft + `, "type": "objekt"}`)}},
			want:  "compiling schema a",
		},
		{
			name:  "DanglingRef",
			files: fstest.MapFS{"a.json": {Data: []byte(`{` + draft + `, "properties": {"x": {"$ref": "common.json#/definitions/nope"}}}`)}},
			want:  "compiling schema a",
		},
		{
			name:  "BadPattern",
			files: fstest.MapFS{"a.json": {Data: []byte(`{` + draft + `, "properties": {"x": {"type": "string", "pattern": "(?<=x)"}}}`)}},
			want:  "compiling schema a",
		},
		{
			name:  "InvalidDefault",
			files: fstest.MapFS{"a.json": {Data: []byte(`{` + draft + `, "properties": {"n": {"type": "integer", "maximum": 3, "default": 5}}}`)}},
			want:  "schema a: default at",
		},
		{
			name:  "InvalidDefaultInsideAlternative",
			files: fstest.MapFS{"a.json": {Data: []byte(`{` + draft + `, "oneOf": [{"properties": {"s": {"type": "string", "default": 1}}}]}`)}},
			want:  "schema a: default at",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := newRegistry(tc.files)
			require.Nil(t, r)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestNewRegistryResolvesCommonDefinitions(t *testing.T) {
	t.Parallel()
	const draft = `"$schema": "http://json-schema.org/draft-06/schema#"`
	r, err := newRegistry(fstest.MapFS{
		"common.json": {Data: []byte(`{` + draft + `, "definitions": {"n": {"type": "integer", "default": 7}}}`)},
		"a.json":      {Data: []byte(`{` + draft + `, "properties": {"n": {"$ref": "common.json#/definitions/n"}}}`)},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, r.Names(), "common.json is not a request schema")
	out, err := r.Validate("a", []byte(`{}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"n": 7}`, string(out), "a default is found through $ref")
}

func TestProblemsAreCapped(t *testing.T) {
	t.Parallel()
	r := setup(t)
	_, err := r.Validate("task-ids-request", []byte(`{"taskIds": [`+strings.Repeat(`1,`, 120)+`1]}`))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Len(t, verr.Problems, maxProblems+1)
	require.Equal(t, "... and 71 more problems", verr.Problems[maxProblems])
	require.Contains(t, verr.Problems[0], ": got number, want string")
}
