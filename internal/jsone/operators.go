package jsone

import (
	"slices"
	"strings"
)

// The operators, each checking its object's keys first as the reference
// does, so that the first error reported is the same.

func (r *renderer) opEval(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$eval"); err != nil {
		return nil, err
	}
	expr, ok := t["$eval"].(string)
	if !ok {
		return nil, templateError("$eval must be given a string expression")
	}
	return r.evaluate(expr, sc)
}

// arrayOperand checks an operator object's keys, renders its operand and
// requires an array: the prelude $flatten, $flattenDeep, $reduce, $find and
// $reverse share. want names what the error says the operand must be.
func (r *renderer) arrayOperand(t map[string]any, op, want string, sc *scope) ([]any, error) {
	if err := check(t, op); err != nil {
		return nil, err
	}
	v, err := r.render(t[op], sc)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, templateError(op + " value must evaluate to " + want)
	}
	return list, nil
}

func (r *renderer) opFlatten(t map[string]any, sc *scope) (any, error) {
	list, err := r.arrayOperand(t, "$flatten", "an array", sc)
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, e := range list {
		if inner, ok := e.([]any); ok {
			out = append(out, inner...)
		} else {
			out = append(out, e)
		}
	}
	return out, nil
}

func (r *renderer) opFlattenDeep(t map[string]any, sc *scope) (any, error) {
	list, err := r.arrayOperand(t, "$flattenDeep", "an array", sc)
	if err != nil {
		return nil, err
	}
	return flattenDeep([]any{}, list), nil
}

func flattenDeep(out, list []any) []any {
	for _, e := range list {
		if inner, ok := e.([]any); ok {
			out = flattenDeep(out, inner)
		} else {
			out = append(out, e)
		}
	}
	return out
}

func (r *renderer) opFromNow(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$fromNow"); err != nil {
		return nil, err
	}
	v, err := r.render(t["$fromNow"], sc)
	if err != nil {
		return nil, err
	}
	reference, _ := sc.lookup("now")
	// The reference tests the template's own `from` (not its rendering)
	// with JavaScript's truthiness.
	if jsTruthy(t["from"]) {
		if reference, err = r.render(t["from"], sc); err != nil {
			return nil, err
		}
	}
	expr, ok := v.(string)
	if !ok {
		return nil, templateError("$fromNow expects a string")
	}
	return fromNow(expr, reference, r.now)
}

func (r *renderer) opIf(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$if"); err != nil {
		return nil, err
	}
	cond, ok := t["$if"].(string)
	if !ok {
		return nil, templateError("$if can evaluate string expressions only")
	}
	v, err := r.evaluate(cond, sc)
	if err != nil {
		return nil, err
	}
	branch := "else"
	if isTruthy(v) {
		if _, ok := t["$then"]; ok {
			return nil, templateError("$if Syntax error: $then: should be spelled then: (no $)")
		}
		branch = "then"
	}
	if b, ok := t[branch]; ok {
		return r.render(b, sc)
	}
	return deleteMarker, nil
}

func (r *renderer) opJSON(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$json"); err != nil {
		return nil, err
	}
	v, err := r.render(t["$json"], sc)
	if err != nil {
		return nil, err
	}
	if containsFunctions(v) {
		return nil, templateError("evaluated template contained uncalled functions")
	}
	var b strings.Builder
	stableJSON(&b, v)
	return b.String(), nil
}

func (r *renderer) opLet(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$let"); err != nil {
		return nil, err
	}
	if _, ok := t["$let"].(map[string]any); !ok {
		return nil, templateError("$let value must be an object")
	}
	v, err := r.render(t["$let"], sc)
	if err != nil {
		return nil, err
	}
	vars, ok := asObject(v)
	if !ok {
		return nil, templateError("$let value must be an object")
	}
	for k := range vars {
		if !identifierKey.MatchString(k) {
			return nil, templateError("top level keys of $let must follow /[a-zA-Z_][a-zA-Z0-9_]*/")
		}
	}
	if t["in"] == nil {
		return nil, templateError("$let operator requires an `in` clause")
	}
	return r.render(t["in"], sc.child(vars))
}

func (r *renderer) opMap(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$map"); err != nil {
		return nil, err
	}
	v, err := r.render(t["$map"], sc)
	if err != nil {
		return nil, err
	}
	obj, isObj := asObject(v)
	list, isList := v.([]any)
	if !isObj && !isList {
		return nil, templateError("$map value must evaluate to an array or object")
	}
	if len(t) != 2 {
		return nil, templateError("$map must have exactly two properties")
	}
	eachKey, _ := otherKey(t, "$map")
	m := eachOneKey.FindStringSubmatch(eachKey)
	if m == nil {
		return nil, templateError("$map requires each(identifier) syntax")
	}
	x, i, each := m[1], m[3], t[eachKey]
	if isObj {
		out := map[string]any{}
		for _, k := range objectKeys(obj) {
			vars := map[string]any{}
			if i != "" {
				vars[x] = obj[k]
				vars[i] = k
			} else {
				vars[x] = map[string]any{"key": k, "val": obj[k]}
			}
			e, err := r.render(each, sc.child(vars))
			if err != nil {
				return nil, err
			}
			eo, ok := asObject(e)
			if !ok {
				return nil, templateError("$map on objects expects each(" + x + ") to evaluate to an object")
			}
			for k, v := range eo {
				out[k] = v
			}
		}
		return out, nil
	}
	out := make([]any, 0, len(list))
	for idx, e := range list {
		vars := map[string]any{x: e}
		if i != "" {
			vars[i] = float64(idx)
		}
		v, err := r.render(each, sc.child(vars))
		if err != nil {
			return nil, err
		}
		if v != deleteMarker {
			out = append(out, v)
		}
	}
	return out, nil
}

func (r *renderer) opReduce(t map[string]any, sc *scope) (any, error) {
	list, err := r.arrayOperand(t, "$reduce", "an array", sc)
	if err != nil {
		return nil, err
	}
	if len(t) != 3 {
		return nil, templateError("$reduce must have exactly three properties")
	}
	eachKey, _ := otherKey(t, "$reduce", "initial")
	m := eachTwoKey.FindStringSubmatch(eachKey)
	if m == nil {
		return nil, templateError("$reduce requires each(identifier) syntax")
	}
	a, x, i, each := m[1], m[2], m[4], t[eachKey]
	// The initial value is used as written, not rendered, as the reference
	// does.
	acc := t["initial"]
	for idx, e := range list {
		vars := map[string]any{a: acc}
		vars[x] = e
		if i != "" {
			vars[i] = float64(idx)
		}
		v, err := r.render(each, sc.child(vars))
		if err != nil {
			return nil, err
		}
		if v != deleteMarker {
			acc = v
		}
	}
	return acc, nil
}

func (r *renderer) opFind(t map[string]any, sc *scope) (any, error) {
	list, err := r.arrayOperand(t, "$find", "an array", sc)
	if err != nil {
		return nil, err
	}
	if len(t) != 2 {
		return nil, templateError("$find must have exactly two properties")
	}
	eachKey, _ := otherKey(t, "$find")
	m := eachOneKey.FindStringSubmatch(eachKey)
	if m == nil {
		return nil, templateError("$find requires each(identifier) syntax")
	}
	each, ok := t[eachKey].(string)
	if !ok {
		return nil, templateError("each can evaluate string expressions only")
	}
	x, i := m[1], m[3]
	for idx, e := range list {
		vars := map[string]any{x: e}
		if i != "" {
			vars[i] = float64(idx)
		}
		child := sc.child(vars)
		c, err := r.evaluate(each, child)
		if err != nil {
			return nil, err
		}
		if !isTruthy(c) {
			continue
		}
		// The reference then renders the expression as a template string
		// and uses that as the verdict: only an empty string rejects.
		s, err := r.interpolate(each, child)
		if err != nil {
			return nil, err
		}
		if s != "" {
			return e, nil
		}
	}
	return deleteMarker, nil
}

// conditions returns an operator's conditions in sorted order, without skip.
func conditions(o map[string]any, skip string) []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sortStrings(keys)
	return keys
}

func (r *renderer) opMatch(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$match"); err != nil {
		return nil, err
	}
	conds, ok := t["$match"].(map[string]any)
	if !ok {
		return nil, templateError("$match can evaluate objects only")
	}
	out := []any{}
	for _, c := range conditions(conds, "") {
		v, err := r.evaluate(c, sc)
		if err != nil {
			return nil, err
		}
		if isTruthy(v) {
			// A branch that renders to the delete marker is kept, as the
			// reference keeps it (it prints as {}).
			v, err := r.render(conds[c], sc)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func (r *renderer) opSwitch(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$switch"); err != nil {
		return nil, err
	}
	conds, ok := t["$switch"].(map[string]any)
	if !ok {
		return nil, templateError("$switch can evaluate objects only")
	}
	var out []any
	for _, c := range conditions(conds, "$default") {
		v, err := r.evaluate(c, sc)
		if err != nil {
			return nil, err
		}
		if isTruthy(v) {
			v, err := r.render(conds[c], sc)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	if len(out) > 1 {
		return nil, templateError("$switch can only have one truthy condition")
	}
	if def, ok := conds["$default"]; ok && len(out) == 0 {
		v, err := r.render(def, sc)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return deleteMarker, nil
	}
	return out[0], nil
}

// renderObjects renders an operator's value, which must be a list of objects.
func (r *renderer) renderObjects(t map[string]any, op string, sc *scope) ([]any, error) {
	if err := check(t, op); err != nil {
		return nil, err
	}
	v, err := r.render(t[op], sc)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if ok {
		for _, e := range list {
			if _, isObj := asObject(e); !isObj {
				ok = false
			}
		}
	}
	if !ok {
		return nil, templateError(op + " value must evaluate to an array of objects")
	}
	return list, nil
}

func (r *renderer) opMerge(t map[string]any, sc *scope) (any, error) {
	list, err := r.renderObjects(t, "$merge", sc)
	if err != nil {
		return nil, err
	}
	return mergeObjects(list...), nil
}

func (r *renderer) opMergeDeep(t map[string]any, sc *scope) (any, error) {
	list, err := r.renderObjects(t, "$mergeDeep", sc)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return map[string]any{}, nil
	}
	acc := list[0]
	for _, e := range list[1:] {
		acc = mergeDeep(acc, e)
	}
	return acc, nil
}

// mergeDeep merges r into l: lists concatenate, objects merge key by key,
// anything else is replaced by r.
func mergeDeep(l, r any) any {
	if ll, ok := l.([]any); ok {
		if rl, ok := r.([]any); ok {
			return append(slices.Clip(ll), rl...)
		}
	}
	lo, lok := asObject(l)
	ro, rok := asObject(r)
	if lok && rok {
		out := mergeObjects(lo)
		for k, rv := range ro {
			if lv, ok := lo[k]; ok {
				out[k] = mergeDeep(lv, rv)
			} else {
				out[k] = rv
			}
		}
		return out
	}
	return r
}

func (r *renderer) opReverse(t map[string]any, sc *scope) (any, error) {
	list, err := r.arrayOperand(t, "$reverse", "an array of objects", sc)
	if err != nil {
		return nil, err
	}
	// In place, as the reference does: a list taken from the context is
	// reversed for the rest of the render too. The caller's own context is
	// not touched, RenderAt works on a copy.
	slices.Reverse(list)
	return list, nil
}

func (r *renderer) opSort(t map[string]any, sc *scope) (any, error) {
	if err := check(t, "$sort"); err != nil {
		return nil, err
	}
	v, err := r.render(t["$sort"], sc)
	if err != nil {
		return nil, err
	}
	sameType := templateError("$sorted values to be sorted must have the same type")
	list, ok := v.([]any)
	if !ok {
		return nil, sameType
	}
	keyName, _ := otherKey(t, "$sort")
	by := func(e any) (any, error) { return e, nil }
	if m := byKey.FindStringSubmatch(keyName); m != nil {
		expr, err := expressionSource(t[keyName])
		if err != nil {
			return nil, err
		}
		by = func(e any) (any, error) { return r.evaluate(expr, sc.child(map[string]any{m[1]: e})) }
	} else {
		for _, e := range list {
			_, isList := e.([]any)
			_, isObj := asObject(e)
			if isList || isObj {
				return nil, sameType
			}
		}
	}
	keys := make([]any, len(list))
	for i, e := range list {
		if keys[i], err = by(e); err != nil {
			return nil, err
		}
	}
	if len(keys) > 0 {
		kind := typeOf(keys[0])
		if kind != "number" && kind != "string" {
			return nil, sameType
		}
		for _, k := range keys {
			if typeOf(k) != kind {
				return nil, sameType
			}
		}
	}
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ka, kb := keys[a], keys[b]
		if sa, ok := ka.(string); ok {
			return compareStrings(sa, kb.(string))
		}
		fa, fb := ka.(float64), kb.(float64)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	})
	out := make([]any, len(list))
	for i, j := range idx {
		out[i] = list[j]
	}
	return out, nil
}

// expressionSource is the by(...) expression, which must be a string; the
// reference fails on anything else with JavaScript's own TypeError.
func expressionSource(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", typeError("Cannot read properties of null (reading 'slice')")
	}
	return "", typeError("source.slice is not a function")
}
