package jsone

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// JSON-e's reference implementation is JavaScript, and several of its
// observable behaviours are JavaScript's own: how numbers print, how strings
// compare, what counts as whitespace. This file holds those rules.

// deleted is JSON-e's "delete marker": what `$if` without a matching branch,
// `$switch` without a match and `$find` without a hit evaluate to. Arrays and
// objects drop it; anywhere else the reference sees an empty object (it is
// one), so the marker also behaves as `{}` when it leaks into a value.
type deleted struct{}

// deleteMarker is the one delete marker; its identity is what is compared.
var deleteMarker = &deleted{}

// function is a callable value: a built-in of the current render.
type function struct {
	name string
	b    *builtin
}

// asObject returns v as an object; the delete marker is an empty one.
func asObject(v any) (map[string]any, bool) {
	switch o := v.(type) {
	case map[string]any:
		return o, true
	case *deleted:
		return nil, true
	}
	return nil, false
}

func isInteger(v any) bool {
	f, ok := v.(float64)
	return ok && !math.IsInf(f, 0) && f == math.Trunc(f)
}

// isTruthy is JSON-e's truthiness (not JavaScript's: an empty array or
// object is false, NaN is true).
func isTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	case *deleted:
		return false
	case *function:
		return true
	}
	return false
}

// jsTruthy is JavaScript's own truthiness, used where the reference tests a
// value with a bare `if (x)`.
func jsTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

// typeOf is JavaScript's `typeof`, with the values JSON-e has.
func typeOf(v any) string {
	switch v.(type) {
	case float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	case *function:
		return "function"
	}
	return "object"
}

// toString is JavaScript's String(v) for JSON-e values.
func toString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return jsvalue.NumberString(x)
	case string:
		return x
	case []any:
		return joinValues(x, ",")
	case *function:
		// JavaScript prints the function's source here; hopper names it.
		return "function " + x.name + "() { [native code] }"
	}
	return "[object Object]"
}

// joinValues is Array.prototype.join: null elements are empty strings.
func joinValues(list []any, sep string) string {
	var b strings.Builder
	for i, e := range list {
		if i > 0 {
			b.WriteString(sep)
		}
		if e != nil {
			b.WriteString(toString(e))
		}
	}
	return b.String()
}

// compareStrings orders strings as JavaScript does, by UTF-16 code units
// (which differs from byte order for characters above U+FFFF).
func compareStrings(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUnit(ra), firstUnit(rb)
			if ua != ub {
				if ua < ub {
					return -1
				}
				return 1
			}
			// Same high surrogate: the low surrogates decide.
			if ra < rb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// sortStrings sorts as JavaScript's default Array.prototype.sort does.
func sortStrings(s []string) {
	sort.SliceStable(s, func(i, j int) bool { return compareStrings(s[i], s[j]) < 0 })
}

// objectKeys lists an object's keys in JavaScript's property order as far as
// it can be known: integer keys first, ascending, then the others (whose
// insertion order a Go map does not keep) in code-unit order.
func objectKeys(o map[string]any) []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ii, iok := arrayIndex(keys[i])
		ji, jok := arrayIndex(keys[j])
		switch {
		case iok && jok:
			return ii < ji
		case iok != jok:
			return iok
		}
		return compareStrings(keys[i], keys[j]) < 0
	})
	return keys
}

// arrayIndex reports whether k is a canonical array index ("0", "17"...),
// which JavaScript objects list before their other keys.
func arrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || (k[0] == '0' && k != "0") {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	if err != nil || n > math.MaxUint32-1 {
		return 0, false
	}
	return n, true
}

// stableJSON is JSON with sorted keys and no spaces, as `$json` renders
// (json-stable-stringify): numbers as JavaScript prints them, non-finite
// numbers as null.
func stableJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool, string:
		if s, ok := x.(string); ok {
			b.WriteString(jsvalue.QuoteJSON(s))
		} else {
			b.WriteString(toString(x))
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			b.WriteString("null")
		} else {
			b.WriteString(jsvalue.NumberString(x))
		}
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			stableJSON(b, e)
		}
		b.WriteByte(']')
	default:
		o, _ := asObject(x)
		keys := make([]string, 0, len(o))
		for k := range o {
			keys = append(keys, k)
		}
		sortStrings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsvalue.QuoteJSON(k))
			b.WriteByte(':')
			stableJSON(b, o[k])
		}
		b.WriteByte('}')
	}
}

// deepEqual is JSON-e's `==`: structural for arrays and objects, identity for
// functions, and JavaScript's === otherwise (NaN differs from itself).
func deepEqual(a, b any) bool {
	if la, ok := a.([]any); ok {
		if lb, ok := b.([]any); ok && len(la) == len(lb) {
			for i := range la {
				if !deepEqual(la[i], lb[i]) {
					return false
				}
			}
			return true
		}
		return false
	}
	if fa, ok := a.(*function); ok {
		fb, ok := b.(*function)
		return ok && fa == fb
	}
	oa, aok := asObject(a)
	ob, bok := asObject(b)
	if aok || bok {
		if !aok || !bok {
			return false
		}
		if len(oa) != len(ob) {
			return false
		}
		for k, va := range oa {
			vb, ok := ob[k]
			if !ok || !deepEqual(va, vb) {
				return false
			}
		}
		return true
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	}
	return false
}
