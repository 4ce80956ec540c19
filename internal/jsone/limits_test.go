package jsone_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/jsone"
)

// TestLimits: a render stops with a TemplateError once it has produced
// more values, or more bytes of strings, than its limits allow, whichever
// construct builds them; a template within them renders as before.
func TestLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template any
		limits   jsone.Limits
		err      string
	}{
		{"nested $map over range", map[string]any{"$map": map[string]any{"$eval": "range(0, 2000)"},
			"each(i)": map[string]any{"$map": map[string]any{"$eval": "range(0, 2000)"}, "each(j)": "${i}-${j}"}},
			jsone.DefaultLimits, "TemplateError: rendering needs more than 500000 values"},
		{"one large range", map[string]any{"$eval": "len(range(0, 1000000))"}, jsone.DefaultLimits, "rendering needs more than 500000 values"},
		{"a string doubled by $reduce", map[string]any{"$reduce": map[string]any{"$eval": "range(0, 40)"}, "initial": "xxxxxxxx",
			"each(acc, i)": map[string]any{"$eval": "acc + acc"}}, jsone.DefaultLimits, "rendering needs more than 16 MiB of strings"},
		{"small limits", map[string]any{"$eval": "range(0, 11)"}, jsone.Limits{Values: 10, Bytes: 100}, "more than 10 values"},
		{"within the limits", map[string]any{"a": map[string]any{"$eval": "range(0, 5)"}, "b": "${'x' + 'y'}"}, jsone.Limits{Values: 40, Bytes: 100}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := jsone.RenderLimited(tt.template, nil, time.Unix(0, 0), tt.limits)
			if tt.err == "" {
				require.NoError(t, err)
				require.Equal(t, map[string]any{"a": []any{0.0, 1.0, 2.0, 3.0, 4.0}, "b": "xy"}, out)
				return
			}
			var jerr *jsone.Error
			require.ErrorAs(t, err, &jerr)
			require.Equal(t, "TemplateError", jerr.Kind)
			require.ErrorContains(t, err, tt.err)
		})
	}
}
