package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefuseNUL: a \u0000 escape in any string of a body, key or value, is
// found and named; an escaped backslash followed by "u0000" is text.
func TestRefuseNUL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body, where string // where "": no NUL
	}{
		{`{"a":"b"}`, ""},
		{`{"a":"\\u0000"}`, ""},
		{`{"a":"\\\\u0000"}`, ""},
		{`{"a":"x\u0001\u0100\u1000"}`, ""},
		{`{"a":"x\u00000"}`, "body.a"},
		{`{"a":"\u0000"}`, "body.a"},
		{`{"a":"\\\u0000"}`, "body.a"},
		{`{"a":{"b":["x","y\u0000"]}}`, "body.a.b[1]"},
		{`{"a\u0000":1}`, `a key of body ("a\x00")`},
		{`{"z":"\u0000","a":"\u0000"}`, "body.a"},
	}
	for _, tt := range tests {
		err := refuseNUL([]byte(tt.body))
		if tt.where == "" {
			require.Nil(t, err, tt.body)
			continue
		}
		require.NotNil(t, err, tt.body)
		require.Equal(t, CodeInputValidationError, err.Code)
		require.Contains(t, err.Message, tt.where+" holds a NUL character", tt.body)
	}
}
