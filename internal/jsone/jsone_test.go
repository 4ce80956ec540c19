package jsone

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRenderAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)
	tests := []struct {
		name     string
		template any
		context  map[string]any
		want     any
		wantErr  string
	}{
		{name: "now defaults to the clock", template: map[string]any{"$eval": "now"}, want: "2030-05-06T07:08:09.123Z"},
		{name: "fromNow counts from the clock", template: map[string]any{"$fromNow": "1 day"}, want: "2030-05-07T07:08:09.123Z"},
		{name: "context now wins", template: "${now}", context: map[string]any{"now": "x"}, want: "x"},
		{name: "json.Number and ints", template: map[string]any{"$eval": "a + b + c"},
			context: map[string]any{"a": json.Number("1.5"), "b": 2, "c": int64(3)}, want: 6.5},
		{name: "NaN comes out as null", template: []any{map[string]any{"$eval": "sqrt(-1)"}}, want: []any{nil}},
		{name: "nil context", template: map[string]any{"$eval": "1 + 1"}, want: 2.0},
		{name: "top level delete marker is null", template: map[string]any{"$if": "false", "then": 1}, want: nil},
		{name: "YAML maps", template: map[any]any{"a": map[any]any{"$eval": "1"}}, want: map[string]any{"a": 1.0}},
		{name: "bad context key", template: 1, context: map[string]any{"a-b": 1}, wantErr: "TemplateError: top level keys of context must follow /[a-zA-Z_][a-zA-Z0-9_]*/"},
		{name: "range limit", template: map[string]any{"$eval": "range(0, 2000000)"}, wantErr: "BuiltinError: range would return 2000000 values, more than hopper's limit of 1048576"},
		{name: "range too long for JavaScript", template: map[string]any{"$eval": "range(0, 10, 0)"}, wantErr: "RangeError: Invalid array length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := RenderAt(tt.template, tt.context, now)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				var e *Error
				require.True(t, errors.As(err, &e))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestNegativeZero checks that -0 comes out as 0 (JSON.stringify's "0",
// where encoding/json would write "-0").
func TestNegativeZero(t *testing.T) {
	t.Parallel()
	got, err := Render([]any{map[string]any{"$eval": "ceil(-0.5)"}, map[string]any{"$eval": "-0"}}, nil)
	require.NoError(t, err)
	out, err := json.Marshal(got)
	require.NoError(t, err)
	require.Equal(t, "[0,0]", string(out))
}

func TestRenderRejectsNonJSONValues(t *testing.T) {
	t.Parallel()
	_, err := Render(1, map[string]any{"f": func() {}})
	require.ErrorContains(t, err, `context value "f": a func() is not a JSON value`)
	_, err = Render(map[any]any{1: "x"}, nil)
	require.ErrorContains(t, err, "object key 1 is a int, not a string")
}

// TestRenderLeavesContextAlone checks that a render never changes the
// caller's values, although $reverse reverses a context list in place for
// the rest of the render as the reference does.
func TestRenderLeavesContextAlone(t *testing.T) {
	t.Parallel()
	list := []any{1.0, 2.0, 3.0}
	ctx := map[string]any{"x": list}
	got, err := Render([]any{map[string]any{"$reverse": map[string]any{"$eval": "x"}}, map[string]any{"$eval": "x"}}, ctx)
	require.NoError(t, err)
	require.Equal(t, []any{[]any{3.0, 2.0, 1.0}, []any{3.0, 2.0, 1.0}}, got)
	require.Equal(t, []any{1.0, 2.0, 3.0}, list)
}

func TestErrorLocation(t *testing.T) {
	t.Parallel()
	_, err := Render(map[string]any{"task": map[string]any{"payload": []any{"${missing}"}}}, nil)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "InterpreterError", e.Kind)
	require.Equal(t, "unknown context value missing", e.Message)
	require.Equal(t, ".task.payload[0]", e.Location)
	require.Equal(t, "InterpreterError at template.task.payload[0]: unknown context value missing", err.Error())
}
