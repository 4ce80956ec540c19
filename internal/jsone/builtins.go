package jsone

import (
	"math"
	"strconv"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// builtin is a function of the expression language. Its arguments are
// checked as the reference checks them: argTests[i] is the type (or types
// joined with "|") argument i must have; a variadic function checks the
// arguments beyond argTests against variadic.
type builtin struct {
	name         string
	argTests     []string
	minArgs      int
	variadic     string
	needsContext bool
	invoke       func(r *renderer, sc *scope, args []any) (any, error)
}

// maxRange is the longest list range() returns: the reference builds any
// length up to 2^32-1 and exhausts the process's memory trying, which a
// server rendering other people's templates must not.
const maxRange = 1 << 20

// newBuiltins returns a fresh set of built-ins for one render: the reference
// builds them per render, and one of them (range, below) keeps state
// between calls within a render.
func newBuiltins() map[string]any {
	defs := []*builtin{
		{name: "max", minArgs: 1, variadic: "number", invoke: minMax(math.Max)},
		{name: "min", minArgs: 1, variadic: "number", invoke: minMax(math.Min)},
		{name: "sqrt", argTests: []string{"number"}, invoke: math1(math.Sqrt)},
		{name: "ceil", argTests: []string{"number"}, invoke: math1(math.Ceil)},
		{name: "floor", argTests: []string{"number"}, invoke: math1(math.Floor)},
		{name: "abs", argTests: []string{"number"}, invoke: math1(math.Abs)},
		{name: "range", minArgs: 2, argTests: []string{"integer", "integer", "integer"}, variadic: "number", invoke: rangeOf},
		{name: "lowercase", argTests: []string{"string"}, invoke: str1(func(s string) any { return cases.Lower(language.Und).String(s) })},
		{name: "uppercase", argTests: []string{"string"}, invoke: str1(func(s string) any { return cases.Upper(language.Und).String(s) })},
		{name: "str", argTests: []string{"string|number|boolean|null"}, invoke: func(_ *renderer, _ *scope, args []any) (any, error) {
			return toString(args[0]), nil
		}},
		{name: "number", argTests: []string{"string"}, invoke: str1(func(s string) any { return jsvalue.Number(s) })},
		{name: "len", argTests: []string{"string|array"}, invoke: func(_ *renderer, _ *scope, args []any) (any, error) {
			if s, ok := args[0].(string); ok {
				return float64(len([]rune(s))), nil
			}
			return float64(len(args[0].([]any))), nil
		}},
		{name: "strip", argTests: []string{"string"}, invoke: str1(func(s string) any { return strings.TrimFunc(s, jsvalue.IsSpace) })},
		{name: "rstrip", argTests: []string{"string"}, invoke: str1(func(s string) any { return strings.TrimRightFunc(s, jsvalue.IsSpace) })},
		{name: "lstrip", argTests: []string{"string"}, invoke: str1(func(s string) any { return strings.TrimLeftFunc(s, jsvalue.IsSpace) })},
		{name: "split", minArgs: 2, argTests: []string{"string", "string|number"}, invoke: split},
		{name: "join", argTests: []string{"array", "string|number"}, invoke: func(_ *renderer, _ *scope, args []any) (any, error) {
			return joinValues(args[0].([]any), toString(args[1])), nil
		}},
		{name: "fromNow", minArgs: 1, variadic: "string", needsContext: true, invoke: fromNowBuiltin},
		{name: "typeof", argTests: []string{"string|number|boolean|array|object|null|function"}, invoke: func(_ *renderer, _ *scope, args []any) (any, error) {
			if _, ok := args[0].([]any); ok {
				return "array", nil
			}
			if args[0] == nil {
				return "null", nil
			}
			return typeOf(args[0]), nil
		}},
		{name: "defined", argTests: []string{"string"}, needsContext: true, invoke: func(_ *renderer, sc *scope, args []any) (any, error) {
			_, ok := sc.lookup(args[0].(string))
			return ok, nil
		}},
	}
	out := make(map[string]any, len(defs))
	for _, d := range defs {
		out[d.name] = &function{name: d.name, b: d}
	}
	return out
}

func minMax(pick func(a, b float64) float64) func(*renderer, *scope, []any) (any, error) {
	return func(_ *renderer, _ *scope, args []any) (any, error) {
		m := args[0].(float64)
		for _, a := range args[1:] {
			m = pick(m, a.(float64))
		}
		return m, nil
	}
}

func math1(f func(float64) float64) func(*renderer, *scope, []any) (any, error) {
	return func(_ *renderer, _ *scope, args []any) (any, error) { return f(args[0].(float64)), nil }
}

func str1(f func(string) any) func(*renderer, *scope, []any) (any, error) {
	return func(_ *renderer, _ *scope, args []any) (any, error) { return f(args[0].(string)), nil }
}

func rangeOf(_ *renderer, _ *scope, args []any) (any, error) {
	start, stop, step := args[0].(float64), args[1].(float64), 1.0
	if len(args) > 2 {
		step = args[2].(float64)
	}
	n := math.Ceil((stop - start) / step)
	switch {
	case math.IsNaN(n) || n <= 0:
		return []any{}, nil
	case n > math.MaxUint32:
		return nil, &Error{Kind: "RangeError", Message: "Invalid array length"}
	case n > maxRange:
		return nil, builtinError("range would return " + jsvalue.NumberString(n) + " values, more than hopper's limit of " + strconv.Itoa(maxRange))
	}
	out := make([]any, int(n))
	for i := range out {
		out[i] = start + float64(i)*step
	}
	return out, nil
}

// split is String.prototype.split. An empty separator splits between code
// points (JavaScript splits between UTF-16 code units, which differs only
// for characters above U+FFFF).
func split(_ *renderer, _ *scope, args []any) (any, error) {
	parts := strings.Split(args[0].(string), toString(args[1]))
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// hasType reports whether v is of the built-in argument type t.
func hasType(t string, v any) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		return isInteger(v)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := asObject(v)
		return ok
	case "null":
		return v == nil
	case "function":
		_, ok := v.(*function)
		return ok
	}
	return false
}

// call checks a built-in's arguments as the reference does, then invokes it.
func (r *renderer) call(fn *function, args []any, sc *scope) (any, error) {
	b := fn.b
	invalid := builtinError("invalid arguments to builtin: " + b.name)
	if b.variadic == "" && len(args) < len(b.argTests) {
		return nil, invalid
	}
	if b.minArgs > 0 && len(args) < b.minArgs {
		return nil, builtinError("invalid arguments to builtin: " + b.name + ": expected at least " + strconv.Itoa(b.minArgs) + " arguments")
	}
	if b.variadic != "" {
		// The reference replaces its list of argument types with one as
		// long as this call's arguments, and keeps it for the next call of
		// the same render: range(0, 2) then range(0, 9, 1.5) accepts the
		// non-integer step. Reproduced on purpose.
		tests := make([]string, len(args))
		for i := range args {
			if i < len(b.argTests) {
				tests[i] = b.argTests[i]
			} else {
				tests[i] = b.variadic
			}
		}
		b.argTests = tests
	}
	for i, a := range args {
		if i >= len(b.argTests) {
			// Too many arguments: the reference reads a type that is not there.
			return nil, typeError("Cannot read properties of undefined (reading 'split')")
		}
		ok := false
		for _, t := range strings.Split(b.argTests[i], "|") {
			if hasType(t, a) {
				ok = true
				break
			}
		}
		if !ok {
			return nil, invalid
		}
	}
	return b.invoke(r, sc, args)
}

// toNumber is JavaScript's Number(v) for JSON-e values.
func toNumber(v any) float64 {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 1
		}
		return 0
	case float64:
		return x
	case string:
		return jsvalue.Number(x)
	case []any:
		return jsvalue.Number(toString(x))
	}
	return math.NaN()
}
