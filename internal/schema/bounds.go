package schema

import (
	"encoding/json"
	"math"
	"regexp/syntax"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds is the most a body valid against a schema can hold, each part
// Unbounded where the schema sets no limit (a string without maxLength,
// an object open to any property, an array without maxItems).
type Bounds struct {
	// Bytes is the body's size written compactly, every character of its
	// strings escaped (\uXXXX, 12 bytes for a character outside the
	// Basic Multilingual Plane), numbers and date-times as long as
	// assumed below.
	Bytes int64
	// Values counts JSON values as the request reader does: objects,
	// arrays, strings, numbers and literals, object keys included.
	Values int64
	// Depth is the nesting of objects and arrays (a top-level object: 1).
	Depth int64
}

// Unbounded marks a part of Bounds the schema leaves open.
const Unbounded = math.MaxInt64

// Two things JSON allows to be endless are assumed short, as everybody
// writes them: a number takes at most numberBytes (any float64 or int64
// with its exponent), and a date-time at most dateTimeChars (RFC 3339
// allows any number of digits of a second). Bodies are refused for their
// bytes only above a generous floor (api's bodyLimitsFor), so these never
// refuse a real body.
const (
	numberBytes   = 64
	dateTimeChars = 64
)

// Bounds returns the bounds of the named schema's bodies.
func (r *Registry) Bounds(name string) (Bounds, error) {
	sch, ok := r.schemas[name]
	if !ok {
		return Bounds{}, &UnknownSchemaError{Name: name}
	}
	return boundsOf(sch, map[*jsonschema.Schema]bool{}), nil
}

var (
	open       = Bounds{Unbounded, Unbounded, Unbounded}
	impossible = Bounds{} // a schema nothing satisfies
)

// add is a+b, saturating at Unbounded.
func add(a, b int64) int64 {
	if a == Unbounded || b == Unbounded || a > Unbounded-b {
		return Unbounded
	}
	return a + b
}

// mul is a*b, saturating at Unbounded.
func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a == Unbounded || b == Unbounded || a > Unbounded/b {
		return Unbounded
	}
	return a * b
}

func (b Bounds) least(o Bounds) Bounds {
	return Bounds{min(b.Bytes, o.Bytes), min(b.Values, o.Values), min(b.Depth, o.Depth)}
}

func (b Bounds) most(o Bounds) Bounds {
	return Bounds{max(b.Bytes, o.Bytes), max(b.Values, o.Values), max(b.Depth, o.Depth)}
}

// boundsOf bounds what sch accepts. Keywords that only narrow what is
// valid further (not, if/then/else, dependencies, minimums) are ignored:
// the bounds stay bounds. A schema met again below itself (recursion)
// bounds nothing.
func boundsOf(sch *jsonschema.Schema, visiting map[*jsonschema.Schema]bool) Bounds {
	switch {
	case sch == nil:
		return open
	case sch.Bool != nil:
		if *sch.Bool {
			return open
		}
		return impossible
	case visiting[sch]:
		return open
	}
	visiting[sch] = true
	defer delete(visiting, sch)
	if sch.Ref != nil && sch.DraftVersion < 2019 {
		// Draft 6 ignores the keywords beside $ref.
		return boundsOf(sch.Ref, visiting)
	}
	b := ownBounds(sch, visiting)
	if sch.Ref != nil {
		b = b.least(boundsOf(sch.Ref, visiting))
	}
	for _, s := range sch.AllOf {
		b = b.least(boundsOf(s, visiting))
	}
	for _, alternatives := range [][]*jsonschema.Schema{sch.AnyOf, sch.OneOf} {
		if len(alternatives) == 0 {
			continue
		}
		any := impossible
		for _, s := range alternatives {
			any = any.most(boundsOf(s, visiting))
		}
		b = b.least(any)
	}
	return b
}

// ownBounds bounds what sch's own type, enum and const keywords accept.
func ownBounds(sch *jsonschema.Schema, visiting map[*jsonschema.Schema]bool) Bounds {
	if sch.Const != nil {
		return valueBounds(*sch.Const)
	}
	if sch.Enum != nil {
		b := impossible
		for _, v := range sch.Enum.Values {
			b = b.most(valueBounds(v))
		}
		return b
	}
	types := []string{"null", "boolean", "number", "string", "array", "object"}
	if sch.Types != nil && !sch.Types.IsEmpty() {
		types = sch.Types.ToStrings()
	}
	b := impossible
	for _, t := range types {
		switch t {
		case "null", "boolean":
			b = b.most(Bounds{Bytes: 5, Values: 1})
		case "number", "integer":
			b = b.most(Bounds{Bytes: numberBytes, Values: 1})
		case "string":
			b = b.most(Bounds{Bytes: stringBytes(sch), Values: 1})
		case "array":
			b = b.most(arrayBounds(sch, visiting))
		case "object":
			b = b.most(objectBounds(sch, visiting))
		}
	}
	return b
}

// valueBounds bounds one value (of an enum or a const).
func valueBounds(v any) Bounds {
	data, err := json.Marshal(v)
	if err != nil {
		return open
	}
	var s Scanner
	s.Feed(data)
	return Bounds{Bytes: mul(int64(len(data)), 12), Values: int64(s.Values), Depth: int64(s.MaxDepth)}
}

// stringBytes bounds a string's bytes from its maxLength or its pattern.
func stringBytes(sch *jsonschema.Schema) int64 {
	chars := int64(Unbounded)
	if sch.MaxLength != nil {
		chars = int64(*sch.MaxLength)
	}
	if sch.Pattern != nil {
		chars = min(chars, patternLength(sch.Pattern.String()))
	}
	if sch.Format != nil && sch.Format.Name == "date-time" {
		chars = min(chars, dateTimeChars)
	}
	return add(mul(chars, 12), 2)
}

// patternLength is the most characters a string matching pattern can
// have: bounded only when every match spans the whole string (^…$) and
// repeats a bounded number of times.
func patternLength(pattern string) int64 {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return Unbounded
	}
	return anchoredLength(re.Simplify())
}

func anchoredLength(re *syntax.Regexp) int64 {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	switch re.Op {
	case syntax.OpAlternate:
		var n int64
		for _, sub := range re.Sub {
			n = max(n, anchoredLength(sub))
		}
		return n
	case syntax.OpConcat:
		if len(re.Sub) >= 2 && re.Sub[0].Op == syntax.OpBeginText && re.Sub[len(re.Sub)-1].Op == syntax.OpEndText {
			return matchLength(re)
		}
	}
	return Unbounded
}

// matchLength is the most characters re matches.
func matchLength(re *syntax.Regexp) int64 {
	switch re.Op {
	case syntax.OpLiteral:
		return int64(len(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpQuest:
		return matchLength(re.Sub[0])
	case syntax.OpConcat:
		var n int64
		for _, sub := range re.Sub {
			n = add(n, matchLength(sub))
		}
		return n
	case syntax.OpAlternate:
		var n int64
		for _, sub := range re.Sub {
			n = max(n, matchLength(sub))
		}
		return n
	case syntax.OpRepeat:
		if re.Max < 0 {
			return Unbounded
		}
		return mul(int64(re.Max), matchLength(re.Sub[0]))
	case syntax.OpStar, syntax.OpPlus:
		return Unbounded
	default: // assertions and empty matches take no characters
		return 0
	}
}

func arrayBounds(sch *jsonschema.Schema, visiting map[*jsonschema.Schema]bool) Bounds {
	n := int64(Unbounded)
	if sch.MaxItems != nil {
		n = int64(*sch.MaxItems)
	}
	// The first items may each have a schema of their own (prefix); the
	// rest share one.
	var prefix []Bounds
	rest := open
	switch items := sch.Items.(type) {
	case *jsonschema.Schema:
		rest = boundsOf(items, visiting)
	case []*jsonschema.Schema:
		for _, s := range items {
			prefix = append(prefix, boundsOf(s, visiting))
		}
		switch more := sch.AdditionalItems.(type) {
		case bool:
			if !more {
				rest, n = impossible, min(n, int64(len(items)))
			}
		case *jsonschema.Schema:
			rest = boundsOf(more, visiting)
		}
	}
	b := Bounds{Bytes: 2, Values: 1}
	var deepest int64
	item := func(count int64, it Bounds) {
		if count == 0 || it == impossible {
			return
		}
		b.Bytes = add(b.Bytes, mul(count, add(it.Bytes, 1))) // value,
		b.Values = add(b.Values, mul(count, it.Values))
		deepest = max(deepest, it.Depth)
	}
	for i, it := range prefix {
		if int64(i) < n {
			item(1, it)
		}
	}
	restCount := int64(Unbounded)
	if n != Unbounded {
		restCount = max(0, n-int64(len(prefix)))
	}
	item(restCount, rest)
	b.Depth = add(deepest, 1)
	return b
}

func objectBounds(sch *jsonschema.Schema, visiting map[*jsonschema.Schema]bool) Bounds {
	b := Bounds{Bytes: 2, Values: 1}
	var children Bounds
	names := sortedKeys(sch.Properties)
	for _, name := range names {
		v := boundsOf(sch.Properties[name], visiting)
		if v == impossible {
			continue
		}
		key, _ := json.Marshal(name)
		b.Bytes = add(b.Bytes, add(mul(int64(len(key)), 12), add(v.Bytes, 2))) // "key":value,
		b.Values = add(b.Values, add(v.Values, 1))
		children = children.most(v)
	}
	closed := len(sch.PatternProperties) == 0
	if more, ok := sch.AdditionalProperties.(bool); !ok || more {
		closed = false
	}
	if !closed {
		// Other properties, named by anyone: as many as maxProperties
		// allows, each as large as the largest it could be.
		var other Bounds
		for _, s := range sch.PatternProperties {
			other = other.most(boundsOf(s, visiting))
		}
		switch more := sch.AdditionalProperties.(type) {
		case *jsonschema.Schema:
			other = other.most(boundsOf(more, visiting))
		case bool:
			if more {
				other = open
			}
		default:
			other = open
		}
		keyBytes := int64(Unbounded)
		if sch.PropertyNames != nil {
			keyBytes = boundsOf(sch.PropertyNames, visiting).Bytes
		}
		n := int64(Unbounded)
		if sch.MaxProperties != nil {
			n = int64(*sch.MaxProperties)
		}
		b.Bytes = add(b.Bytes, mul(n, add(keyBytes, add(other.Bytes, 2))))
		b.Values = add(b.Values, mul(n, add(other.Values, 1)))
		children = children.most(other)
	}
	b.Depth = add(children.Depth, 1)
	return b
}
