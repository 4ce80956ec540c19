package jsone

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seedExpressions adds every expression of the vectors (the $eval strings and
// the interpolated strings) to a fuzz corpus.
func seedExpressions(f *testing.F) {
	for _, c := range loadVectors(f).Cases {
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				f.Add(x)
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					f.Add(k)
					walk(e)
				}
			}
		}
		walk(c.Template)
	}
}

// FuzzParse feeds arbitrary text to the expression parser and evaluator and
// to string interpolation: whatever the input, the result is a value or an
// *Error, never a panic.
func FuzzParse(f *testing.F) {
	seedExpressions(f)
	context := map[string]any{"a": []any{1.0, "x", nil}, "o": map[string]any{"k": true}, "s": "héllo😀", "n": 2.5}
	now := time.Date(2017, 1, 19, 16, 27, 20, 974e6, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		for _, template := range []any{map[string]any{"$eval": expr}, expr} {
			_, err := RenderAt(template, context, now)
			if err != nil {
				if _, ok := err.(*Error); !ok {
					t.Fatalf("render %q: error %T %v is not an *Error", expr, err, err)
				}
			}
		}
	})
}

// FuzzRender renders arbitrary JSON templates (seeded with the templates and
// contexts of both vector files): no input panics, and every result is JSON.
func FuzzRender(f *testing.F) {
	for _, c := range loadVectors(f).Cases {
		tpl, err := json.Marshal(c.Template)
		if err != nil {
			f.Fatal(err)
		}
		ctx, err := json.Marshal(c.Context)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(tpl), string(ctx))
	}
	raw, err := os.ReadFile("testdata/random.json")
	if err != nil {
		f.Fatal(err)
	}
	var random struct {
		Context map[string]any `json:"context"`
		Cases   []struct {
			Template json.RawMessage `json:"template"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &random); err != nil {
		f.Fatal(err)
	}
	ctx, err := json.Marshal(random.Context)
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range random.Cases {
		f.Add(string(c.Template), string(ctx))
	}
	now := time.Date(2017, 1, 19, 16, 27, 20, 974e6, time.UTC)
	f.Fuzz(func(t *testing.T, template, context string) {
		var tpl any
		var ctx map[string]any
		if json.Unmarshal([]byte(template), &tpl) != nil || json.Unmarshal([]byte(context), &ctx) != nil {
			return
		}
		got, err := RenderAt(tpl, ctx, now)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			return
		}
		if _, err := json.Marshal(got); err != nil {
			t.Fatalf("result %#v is not JSON: %v", got, err)
		}
	})
}

// TestDeepExpressions checks that absurdly nested expressions fail cleanly
// instead of exhausting the stack.
func TestDeepExpressions(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000),
		strings.Repeat("[", 100000),
		strings.Repeat("-", 100000) + "1",
		strings.Repeat("{a:", 100000),
		strings.Repeat("a[", 100000),
		strings.Repeat("min(", 100000),
		strings.Repeat("1**", 100000) + "1",
		strings.Repeat("1+", 100000) + "1",
		"a" + strings.Repeat("[0]", 100000),
	} {
		_, err := RenderAt(map[string]any{"$eval": expr}, map[string]any{"a": []any{}}, time.Now())
		require.Error(t, err)
	}
	got, err := RenderAt(map[string]any{"$eval": strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100)}, nil, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1.0, got)
}
