package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// Template is a scope-expression template as endpoints declare them: a
// scope expression whose strings may contain <param> placeholders, plus
// {"for": x, "in": xs, "each": "...<x>..."} (one string per element of
// the array parameter xs, spliced into the enclosing AllOf/AnyOf) and
// {"if": flag, "then": T[, "else": E]} (a boolean parameter choosing a
// branch; false without else renders nothing).
//
// A Template is immutable and safe for concurrent use.
type Template struct {
	root   tmplNode
	params map[string]ParamType
}

// ParamType is the type a template requires of a parameter.
type ParamType string

// Parameter types.
const (
	// ParamString is a string or a number (numbers render in decimal).
	ParamString ParamType = "string"
	// ParamArray is an array of strings ([]string or []any of strings).
	ParamArray ParamType = "array"
	// ParamBool is a boolean.
	ParamBool ParamType = "boolean"
)

type tmplKind uint8

const (
	tmplString tmplKind = iota
	tmplAllOf
	tmplAnyOf
	tmplFor
	tmplIf
)

type tmplNode struct {
	kind tmplKind
	// parts of a string: even indexes are literal text, odd indexes are
	// parameter names.
	parts []string
	// members of AllOf/AnyOf.
	members []tmplNode
	// for/in/each.
	forVar, inVar string
	each          []string
	// if/then/else.
	ifVar    string
	then     *tmplNode
	elseNode *tmplNode
}

// ParseTemplate decodes and validates a JSON scope-expression template.
func ParseTemplate(data []byte) (*Template, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decoding scope expression template: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decoding scope expression template: trailing data")
	}
	return newTemplate(raw)
}

// MustParseTemplate is ParseTemplate for templates fixed at compile time;
// it panics on an invalid template.
func MustParseTemplate(text string) *Template {
	t, err := ParseTemplate([]byte(text))
	if err != nil {
		panic(err)
	}
	return t
}

func newTemplate(raw any) (*Template, error) {
	ps := templateParsers()
	if !ps.validRoot(raw) {
		b, _ := json.Marshal(raw)
		return nil, fmt.Errorf("invalid scope expression template %s", b)
	}
	root := ps.compile(raw)
	params, err := extractParams(root)
	if err != nil {
		return nil, err
	}
	return &Template{root: root, params: params}, nil
}

type tmplParsers struct {
	param, placeholder *regexp.Regexp
}

func templateParsers() tmplParsers {
	return tmplParsers{
		param:       regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]*$`),
		placeholder: regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9_]*)>`),
	}
}

func keysAre(m map[string]any, keys ...string) bool {
	if len(m) != len(keys) {
		return false
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

func (ps tmplParsers) validRoot(v any) bool {
	if !ps.valid(v) {
		return false
	}
	if _, ok := v.(string); ok {
		return true
	}
	m := v.(map[string]any)
	_, all := m["AllOf"]
	_, any_ := m["AnyOf"]
	_, cond := m["if"]
	return all || any_ || cond
}

func (ps tmplParsers) isParam(v any) bool {
	s, ok := v.(string)
	return ok && ps.param.MatchString(s)
}

func (ps tmplParsers) valid(v any) bool {
	switch v := v.(type) {
	case string:
		return true
	case map[string]any:
		switch {
		case keysAre(v, "AllOf"), keysAre(v, "AnyOf"):
			var list any
			if l, ok := v["AllOf"]; ok {
				list = l
			} else {
				list = v["AnyOf"]
			}
			items, ok := list.([]any)
			if !ok {
				return false
			}
			for _, item := range items {
				if !ps.valid(item) {
					return false
				}
			}
			return true
		case keysAre(v, "for", "in", "each"):
			_, eachIsString := v["each"].(string)
			return ps.isParam(v["for"]) && ps.isParam(v["in"]) && eachIsString
		case keysAre(v, "if", "then"):
			return ps.isParam(v["if"]) && ps.validRoot(v["then"])
		case keysAre(v, "if", "then", "else"):
			return ps.isParam(v["if"]) && ps.validRoot(v["then"]) && ps.validRoot(v["else"])
		}
	}
	return false
}

func (ps tmplParsers) split(s string) []string {
	var parts []string
	last := 0
	for _, m := range ps.placeholder.FindAllStringSubmatchIndex(s, -1) {
		parts = append(parts, s[last:m[0]], s[m[2]:m[3]])
		last = m[1]
	}
	return append(parts, s[last:])
}

// compile turns a validated template into nodes.
func (ps tmplParsers) compile(v any) tmplNode {
	if s, ok := v.(string); ok {
		return tmplNode{kind: tmplString, parts: ps.split(s)}
	}
	m := v.(map[string]any)
	if list, ok := m["AllOf"]; ok {
		return tmplNode{kind: tmplAllOf, members: ps.compileList(list)}
	}
	if list, ok := m["AnyOf"]; ok {
		return tmplNode{kind: tmplAnyOf, members: ps.compileList(list)}
	}
	if _, ok := m["for"]; ok {
		return tmplNode{kind: tmplFor, forVar: m["for"].(string), inVar: m["in"].(string), each: ps.split(m["each"].(string))}
	}
	n := tmplNode{kind: tmplIf, ifVar: m["if"].(string)}
	then := ps.compile(m["then"])
	n.then = &then
	if e, ok := m["else"]; ok {
		en := ps.compile(e)
		n.elseNode = &en
	}
	return n
}

func (ps tmplParsers) compileList(list any) []tmplNode {
	items := list.([]any)
	out := make([]tmplNode, len(items))
	for i, item := range items {
		out[i] = ps.compile(item)
	}
	return out
}

func mergeParamTypes(into, from map[string]ParamType) error {
	for _, p := range slices.Sorted(maps.Keys(from)) {
		t := from[p]
		if prev, ok := into[p]; ok && prev != t {
			return fmt.Errorf("parameter %s cannot be both '%s' and '%s'", p, t, prev)
		}
		into[p] = t
	}
	return nil
}

func extractParams(n tmplNode) (map[string]ParamType, error) {
	out := map[string]ParamType{}
	switch n.kind {
	case tmplString:
		for i := 1; i < len(n.parts); i += 2 {
			out[n.parts[i]] = ParamString
		}
	case tmplAllOf, tmplAnyOf:
		for _, m := range n.members {
			sub, err := extractParams(m)
			if err != nil {
				return nil, err
			}
			if err := mergeParamTypes(out, sub); err != nil {
				return nil, err
			}
		}
	case tmplFor:
		out[n.inVar] = ParamArray
		if err := mergeParamTypes(out, map[string]ParamType{n.forVar: ParamString}); err != nil {
			return nil, err
		}
		sub, err := extractParams(tmplNode{kind: tmplString, parts: n.each})
		if err != nil {
			return nil, err
		}
		if err := mergeParamTypes(out, sub); err != nil {
			return nil, err
		}
		delete(out, n.forVar)
	case tmplIf:
		out[n.ifVar] = ParamBool
		branches, err := extractParams(*n.then)
		if err != nil {
			return nil, err
		}
		if n.elseNode != nil {
			sub, err := extractParams(*n.elseNode)
			if err != nil {
				return nil, err
			}
			if err := mergeParamTypes(branches, sub); err != nil {
				return nil, err
			}
		}
		if err := mergeParamTypes(out, branches); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Params returns the parameters the template uses and their types.
func (t *Template) Params() map[string]ParamType { return maps.Clone(t.params) }

// RendersFrom reports whether parameters with the given names, all
// strings, suffice to render the template. The API layer asks this with
// the route's URL parameters to decide whether the scope check can run
// before the handler (so that a 403 precedes a 404).
func (t *Template) RendersFrom(stringParams ...string) bool {
	for p, typ := range t.params {
		if typ != ParamString || !slices.Contains(stringParams, p) {
			return false
		}
	}
	return true
}

// Render substitutes params into the template. Parameter values may be
// strings, numbers (any Go integer or float type, or json.Number),
// []string or []any of strings/numbers for "in" parameters, and bool for
// "if" parameters; a placeholder whose parameter is absent renders as "".
// ok is false when the template renders to nothing (a false "if" without
// "else" at the root), which makes the call public.
func (t *Template) Render(params map[string]any) (expr Expr, ok bool, err error) {
	out, err := renderNode(t.root, params)
	if err != nil {
		return Expr{}, false, err
	}
	if len(out) == 0 {
		return Expr{}, false, nil
	}
	return out[0], true, nil
}

// renderNode renders n to zero expressions (nothing), one, or several
// (a "for" node, to be spliced into its parent).
func renderNode(n tmplNode, params map[string]any) ([]Expr, error) {
	switch n.kind {
	case tmplString:
		s, err := renderString(n.parts, params)
		if err != nil {
			return nil, err
		}
		return []Expr{Scope(s)}, nil
	case tmplAllOf, tmplAnyOf:
		members := []Expr{}
		for _, m := range n.members {
			sub, err := renderNode(m, params)
			if err != nil {
				return nil, err
			}
			members = append(members, sub...)
		}
		if n.kind == tmplAllOf {
			return []Expr{AllOf(members...)}, nil
		}
		return []Expr{AnyOf(members...)}, nil
	case tmplFor:
		values, ok := arrayParam(params[n.inVar])
		if !ok {
			return nil, fmt.Errorf("scope expression template expected parameter '%s' to be a array", n.inVar)
		}
		nested := maps.Clone(params)
		if nested == nil {
			nested = map[string]any{}
		}
		out := make([]Expr, 0, len(values))
		for _, v := range values {
			nested[n.forVar] = v
			s, err := renderString(n.each, nested)
			if err != nil {
				return nil, err
			}
			out = append(out, Scope(s))
		}
		return out, nil
	default: // tmplIf
		v, ok := params[n.ifVar].(bool)
		if !ok {
			return nil, fmt.Errorf("scope expression template expected parameter '%s' to be a boolean", n.ifVar)
		}
		if v {
			return renderNode(*n.then, params)
		}
		if n.elseNode != nil {
			return renderNode(*n.elseNode, params)
		}
		return nil, nil
	}
}

func renderString(parts []string, params map[string]any) (string, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	var b []byte
	for i, p := range parts {
		if i%2 == 0 {
			b = append(b, p...)
			continue
		}
		v, present := params[p]
		if !present {
			continue
		}
		s, ok := stringParam(v)
		if !ok {
			return "", fmt.Errorf("scope expression template expected parameter '%s' to be a string, number, or undefined", p)
		}
		b = append(b, s...)
	}
	return string(b), nil
}

// stringParam converts a string or number parameter to its rendering.
func stringParam(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return "", false
		}
		return jsvalue.NumberString(f), true
	case int:
		return strconv.Itoa(v), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint:
		return strconv.FormatUint(uint64(v), 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float32:
		return jsvalue.NumberString(float64(v)), true
	case float64:
		return jsvalue.NumberString(v), true
	}
	return "", false
}

func arrayParam(v any) ([]any, bool) {
	switch v := v.(type) {
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out, true
	case []any:
		return v, true
	}
	return nil, false
}
