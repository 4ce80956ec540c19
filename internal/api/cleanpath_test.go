package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEscapeTail(t *testing.T) {
	t.Parallel()
	tr, ok := newTailRoute("/api/queue/v1/task/{taskId}/runs/{runId}/artifacts/{name...}")
	require.True(t, ok)
	_, ok = newTailRoute("/api/queue/v1/task/{taskId}")
	require.False(t, ok, "only routes ending in a {name...} wildcard have a tail")

	const prefix = "/api/queue/v1/task/T/runs/0/artifacts/"
	tests := []struct {
		path   string
		want   string
		wantOK bool
	}{
		{prefix + "public//x", prefix + "public%2F%2Fx", true},
		{prefix + "public/./x", prefix + "public%2F.%2Fx", true},
		{prefix + "/leading", prefix + "%2Fleading", true},
		{prefix + "public/../x", prefix + "public%2F..%2Fx", true},
		{prefix + "a%2Fb//c", prefix + "a%2Fb%2F%2Fc", true},
		{prefix, "", false}, // no name
		{"/api/queue/v1/task/T/runs/0/other/x//y", "", false},   // another route
		{"/api/queue/v1/task/../runs/0/artifacts/x", "", false}, // a dot segment is no taskId
		{"/api/queue/v1/task//runs/0/artifacts/x", "", false},   // nor an empty one
	}
	for _, tc := range tests {
		got, ok := tr.escapeTail(tc.path)
		require.Equal(t, tc.wantOK, ok, tc.path)
		require.Equal(t, tc.want, got, tc.path)
	}
}

func TestCanonicalPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/a/b":    "/a/b",
		"/a/b/":   "/a/b/",
		"/a//b":   "/a/b",
		"/a/./b/": "/a/b/",
		"/a/../b": "/b",
		"/":       "/",
	} {
		require.Equal(t, want, canonicalPath(path), path)
	}
}

func TestValidUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"a":"plain"}`, `{"a":"plain"}`},
		{`{"a":"é ✓ 😀"}`, `{"a":"é ✓ 😀"}`},
		{"{\"a\":\"x\xffy\"}", "{\"a\":\"x\uFFFDy\"}"},
		{"{\"a\":\"\xc3\"}", "{\"a\":\"\uFFFD\"}"},                     // a truncated sequence
		{"{\"a\":\"\xfe\xfd\"}", "{\"a\":\"\uFFFD\uFFFD\"}"},           // one per byte
		{"{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\uFFFD\uFFFD\uFFFD\"}"}, // an encoded surrogate
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, string(validUTF8([]byte(tc.in))), "%q", tc.in)
	}
	valid := []byte(`{"a":"b"}`)
	require.Same(t, &valid[0], &validUTF8(valid)[0], "a valid body is returned as is")
}
