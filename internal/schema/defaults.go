package schema

import (
	"encoding/json"
	"math/big"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fill returns value with the defaults of sch applied, walking the value and
// the compiled schema side by side. Objects and arrays are updated in place
// (the caller owns the freshly decoded value); the result must still be used,
// because alternatives of oneOf/anyOf are tried on copies.
//
// It follows what Taskcluster's validator (ajv with useDefaults) does for
// properties — an absent property whose schema has a default receives a copy
// of it — and goes further where ajv stops: defaults are looked up through
// $ref, and for oneOf/anyOf the first alternative that validates once filled
// supplies its defaults (ajv ignores defaults inside those keywords, which
// would leave e.g. a link artifact's contentType unset).
//
// A tracking filler records what changed, so that a body whose only changes
// are defaults added to its top-level object can be patched rather than
// encoded again; root says value is that top-level object.
func (f *filler) fill(sch *jsonschema.Schema, value any, depth int, root bool) any {
	if sch == nil || depth > maxFillDepth {
		return value
	}
	if sch.Ref != nil {
		value = f.fill(sch.Ref, value, depth+1, root)
	}
	for _, sub := range sch.AllOf {
		value = f.fill(sub, value, depth+1, root)
	}

	switch v := value.(type) {
	case map[string]any:
		f.fillObject(sch, v, depth, root)
	case []any:
		f.fillArray(sch, v, depth)
	case json.Number:
		if onlyInteger(sch) {
			value = canonicalInteger(v)
			if value != v {
				f.changedBelow()
			}
		}
	}

	if alt, ok := f.fillAlternative(sch.OneOf, value, depth); ok {
		value = alt
		f.changedBelow()
	} else if alt, ok := f.fillAlternative(sch.AnyOf, value, depth); ok {
		value = alt
		f.changedBelow()
	}
	return value
}

// filler fills defaults into one body (see fill) and records what changed.
type filler struct {
	// order is the registry's cache of each compiled schema's property
	// names, sorted: sorting them on every object of every request was
	// most of fill's cost.
	order *sync.Map // *jsonschema.Schema → []string
	// track says changes are recorded (not while filling copies).
	track bool
	// deep is set when anything but a member added to the top-level
	// object changed.
	deep bool
	// added names the members added to the top-level object.
	added []string
}

// untracked returns a filler for copies, whose changes are not the body's.
func (f *filler) untracked() *filler { return &filler{order: f.order} }

func (f *filler) changedBelow() {
	if f.track {
		f.deep = true
	}
}

// propertyOrder returns the schema's property names, sorted.
func (f *filler) propertyOrder(sch *jsonschema.Schema) []string {
	if names, ok := f.order.Load(sch); ok {
		return names.([]string)
	}
	names := sortedKeys(sch.Properties)
	f.order.Store(sch, names)
	return names
}

// fillObject applies property defaults to obj and recurses into its members.
func (f *filler) fillObject(sch *jsonschema.Schema, obj map[string]any, depth int, root bool) {
	for _, name := range f.propertyOrder(sch) {
		propSchema := sch.Properties[name]
		member, present := obj[name]
		if present {
			obj[name] = f.fill(propSchema, member, depth+1, false)
			continue
		}
		def, ok := defaultOf(propSchema, depth)
		if !ok {
			continue
		}
		// A default is filled in turn (it may have defaults of its own);
		// what it becomes depends on the schema alone.
		obj[name] = f.untracked().fill(propSchema, deepCopy(def), depth+1, false)
		switch {
		case !f.track:
		case root:
			f.added = append(f.added, name)
		default:
			f.deep = true
		}
	}
	additional, _ := sch.AdditionalProperties.(*jsonschema.Schema)
	if additional == nil && len(sch.PatternProperties) == 0 {
		return
	}
	for name, member := range obj {
		if _, declared := sch.Properties[name]; declared {
			continue
		}
		matched := false
		for re, patternSchema := range sch.PatternProperties {
			if re.MatchString(name) {
				member = f.fill(patternSchema, member, depth+1, false)
				matched = true
			}
		}
		if !matched && additional != nil {
			member = f.fill(additional, member, depth+1, false)
		}
		obj[name] = member
	}
}

// fillArray recurses into the items of arr.
func (f *filler) fillArray(sch *jsonschema.Schema, arr []any, depth int) {
	switch items := sch.Items.(type) {
	case *jsonschema.Schema:
		for i := range arr {
			arr[i] = f.fill(items, arr[i], depth+1, false)
		}
	case []*jsonschema.Schema:
		for i := range arr {
			if i < len(items) {
				arr[i] = f.fill(items[i], arr[i], depth+1, false)
			} else if extra, ok := sch.AdditionalItems.(*jsonschema.Schema); ok {
				arr[i] = f.fill(extra, arr[i], depth+1, false)
			}
		}
	}
}

// fillAlternative fills a copy of value with each alternative in turn and
// returns the first copy that validates against its alternative. When none
// does, value is left alone so that validation reports the original body.
func (f *filler) fillAlternative(alternatives []*jsonschema.Schema, value any, depth int) (any, bool) {
	for _, alt := range alternatives {
		candidate := f.untracked().fill(alt, deepCopy(value), depth+1, false)
		if alt.Validate(candidate) == nil {
			return candidate, true
		}
	}
	return nil, false
}

// defaultOf returns the default a property schema declares, looking through
// $ref chains: draft-06 ignores a "default" written beside "$ref", so shared
// definitions carry defaults only on the definition itself.
func defaultOf(sch *jsonschema.Schema, depth int) (any, bool) {
	for ; sch != nil && depth <= maxFillDepth; depth++ {
		if sch.Default != nil {
			return *sch.Default, true
		}
		sch = sch.Ref
	}
	return nil, false
}

// onlyInteger reports whether sch admits numbers only as integers.
func onlyInteger(sch *jsonschema.Schema) bool {
	if sch.Types == nil {
		return false
	}
	integer := false
	for _, t := range sch.Types.ToStrings() {
		switch t {
		case "integer":
			integer = true
		case "number":
			return false
		}
	}
	return integer
}

// canonicalInteger rewrites an integral number spelled with a fraction or an
// exponent ("5.0", "5e0") as a plain integer ("5"), so that the re-encoded
// body unmarshals into Go integer fields. JSON Schema counts such values as
// integers, so they pass validation; anything else is returned unchanged for
// validation to judge. big.Rat refuses absurd exponents, which keeps this
// cheap on hostile input.
func canonicalInteger(n json.Number) json.Number {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		return n
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return n
	}
	return json.Number(r.Num().String())
}

// deepCopy copies the containers of a decoded JSON value so that defaults
// taken from a compiled schema, and bodies tried against alternatives, are
// never shared or mutated through another reference.
func deepCopy(value any) any {
	switch v := value.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, member := range v {
			out[k] = deepCopy(member)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = deepCopy(item)
		}
		return out
	default:
		return v
	}
}
