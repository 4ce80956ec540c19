package jsone

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// renderer renders one template: it holds what lasts for the length of one
// render, the clock and the recursion depth (the built-ins, also made per
// render, live in the root scope).
type renderer struct {
	now time.Time
	// limits bound what one render may build; spent is what it has.
	limits Limits
	spent  Limits
	// depth counts nested render and eval calls, bounded by maxDepth: a
	// left-nested expression ("1+1+1+...") is parsed by a loop but
	// evaluated by recursion.
	depth int
}

// enter counts one level of render or eval recursion; the caller defers
// leave.
func (r *renderer) enter() error {
	r.depth++
	if r.depth > maxDepth {
		return &Error{Kind: "RangeError", Message: "Maximum call stack size exceeded"}
	}
	return nil
}

func (r *renderer) leave() { r.depth-- }

// operator returns the function of a JSON-e operator key, or nil.
func operator(key string) func(r *renderer, t map[string]any, sc *scope) (any, error) {
	switch key {
	case "$eval":
		return (*renderer).opEval
	case "$flatten":
		return (*renderer).opFlatten
	case "$flattenDeep":
		return (*renderer).opFlattenDeep
	case "$fromNow":
		return (*renderer).opFromNow
	case "$if":
		return (*renderer).opIf
	case "$json":
		return (*renderer).opJSON
	case "$let":
		return (*renderer).opLet
	case "$map":
		return (*renderer).opMap
	case "$reduce":
		return (*renderer).opReduce
	case "$find":
		return (*renderer).opFind
	case "$match":
		return (*renderer).opMatch
	case "$switch":
		return (*renderer).opSwitch
	case "$merge":
		return (*renderer).opMerge
	case "$mergeDeep":
		return (*renderer).opMergeDeep
	case "$reverse":
		return (*renderer).opReverse
	case "$sort":
		return (*renderer).opSort
	}
	return nil
}

var (
	identifierKey = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	plainKey      = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]*$`)
	reservedKey   = regexp.MustCompile(`^\$[a-zA-Z][a-zA-Z0-9]*$`)
)

// render renders a template value in a scope, counting what it builds
// against the render's limits. It may return the delete marker, which the
// enclosing array or object drops.
func (r *renderer) render(t any, sc *scope) (any, error) {
	v, err := r.renderValue(t, sc)
	if err == nil {
		err = r.charge(v)
	}
	return v, err
}

func (r *renderer) renderValue(t any, sc *scope) (any, error) {
	defer r.leave()
	if err := r.enter(); err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case nil, bool, float64, *function, *deleted:
		return t, nil
	case string:
		return r.interpolate(x, sc)
	case []any:
		out := make([]any, 0, len(x))
		for i, e := range x {
			v, err := r.render(e, sc)
			if err != nil {
				return nil, withLocation(err, "["+strconv.Itoa(i)+"]")
			}
			if v != deleteMarker {
				out = append(out, v)
			}
		}
		return out, nil
	case map[string]any:
		return r.renderObject(x, sc)
	}
	return nil, templateError("unsupported value in template")
}

func (r *renderer) renderObject(t map[string]any, sc *scope) (any, error) {
	var op string
	for k := range t {
		if operator(k) != nil {
			if op != "" {
				return nil, templateError("only one operator allowed")
			}
			op = k
		}
	}
	if op != "" {
		return operator(op)(r, t, sc)
	}
	out := make(map[string]any, len(t))
	for _, key := range objectKeys(t) {
		v, err := r.render(t[key], sc)
		if err != nil {
			if plainKey.MatchString(key) {
				return nil, withLocation(err, "."+key)
			}
			return nil, withLocation(err, "["+jsvalue.QuoteJSON(key)+"]")
		}
		if v == deleteMarker {
			continue
		}
		switch {
		case strings.HasPrefix(key, "$$"):
			key = key[1:]
		case reservedKey.MatchString(key):
			return nil, templateError("$<identifier> is reserved; use $$<identifier>")
		default:
			if key, err = r.interpolate(key, sc); err != nil {
				return nil, err
			}
		}
		out[key] = v
	}
	return out, nil
}

// interpolate replaces each ${expression} in s by its value and each $${
// by ${.
func (r *renderer) interpolate(s string, sc *scope) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			break
		}
		if i > 0 && rest[i-1] == '$' {
			// "$${" is an escaped "${".
			b.WriteString(rest[:i-1])
			b.WriteString("${")
			rest = rest[i+2:]
			continue
		}
		b.WriteString(rest[:i])
		source := rest[i+2:]
		n, end, err := parseInterpolation(source)
		if err != nil {
			return "", err
		}
		v, err := r.eval(n, sc)
		if err != nil {
			return "", err
		}
		switch v.(type) {
		case []any, map[string]any, *deleted:
			return "", templateError("interpolation of '" + source[:end] + "' produced an array or object")
		case nil:
		default:
			b.WriteString(toString(v))
		}
		rest = source[end+1:]
	}
	b.WriteString(rest)
	return b.String(), nil
}

// checkProperties rejects keys of an operator's object that none of allowed
// matches. Like the reference's, the check is a regular expression of the
// alternatives with only the last one anchored at the end, and none at the
// start: `$let` accepts any key ending in "in".
func checkProperties(t map[string]any, name string, allowed *regexp.Regexp) error {
	var unknown []string
	for k := range t {
		if !allowed.MatchString(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sortStrings(unknown)
	return templateError(name + " has undefined properties: " + strings.Join(unknown, " "))
}

// operatorRule compiles the allowed-keys pattern of an operator.
func operatorRule(alternatives ...string) *regexp.Regexp {
	return regexp.MustCompile(strings.Join(alternatives, "|") + "$")
}

const identifierPattern = `[a-zA-Z_][a-zA-Z0-9_]*`

var (
	eachOne = `each\((` + identifierPattern + `)(,` + jsvalue.SpaceClass + `*(` + identifierPattern + `))?\)`
	eachTwo = `each\((` + identifierPattern + `),` + jsvalue.SpaceClass + `*(` + identifierPattern + `)(,` + jsvalue.SpaceClass + `*(` + identifierPattern + `))?\)`

	eachOneKey = regexp.MustCompile(`^` + eachOne + `$`)
	eachTwoKey = regexp.MustCompile(`^` + eachTwo + `$`)
	byKey      = regexp.MustCompile(`^by\((` + identifierPattern + `)\)$`)

	rules = map[string]*regexp.Regexp{
		"$eval":        operatorRule(`\$eval`),
		"$flatten":     operatorRule(`\$flatten`),
		"$flattenDeep": operatorRule(`\$flattenDeep`),
		"$fromNow":     operatorRule(`\$fromNow`, `from`),
		"$if":          operatorRule(`\$if`, `then`, `else`),
		"$json":        operatorRule(`\$json`),
		"$let":         operatorRule(`\$let`, `in`),
		"$map":         operatorRule(`\$map`, eachOne),
		"$reduce":      operatorRule(`\$reduce`, `initial`, eachTwo),
		"$find":        operatorRule(`\$find`, eachOne),
		"$match":       operatorRule(`\$match`),
		"$switch":      operatorRule(`\$switch`),
		"$merge":       operatorRule(`\$merge`),
		"$mergeDeep":   operatorRule(`\$mergeDeep`),
		"$reverse":     operatorRule(`\$reverse`),
		"$sort":        operatorRule(`\$sort`, `by\((`+identifierPattern+`)\)`),
	}
)

func check(t map[string]any, op string) error { return checkProperties(t, op, rules[op]) }

// otherKey returns the first key of t, in property order, that is none of
// skip.
func otherKey(t map[string]any, skip ...string) (string, bool) {
	for _, k := range objectKeys(t) {
		found := false
		for _, s := range skip {
			found = found || k == s
		}
		if !found {
			return k, true
		}
	}
	return "", false
}

// mergeObjects is a shallow merge, later objects winning.
func mergeObjects(objects ...any) map[string]any {
	out := map[string]any{}
	for _, o := range objects {
		m, _ := asObject(o)
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// containsFunctions reports whether a rendered value still holds a function
// (a built-in evaluated but never called), which JSON cannot carry.
func containsFunctions(v any) bool {
	switch x := v.(type) {
	case *function:
		return true
	case []any:
		for _, e := range x {
			if containsFunctions(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if containsFunctions(e) {
				return true
			}
		}
	}
	return false
}
