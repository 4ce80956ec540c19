package jsone

import (
	"math"
	"strings"
	"unicode/utf8"
)

// scope is a context: the variables a template or expression sees. Operators
// that bind names ($let, $map, ...) add a child scope over their parent.
type scope struct {
	vars   map[string]any
	parent *scope
}

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

func (s *scope) child(vars map[string]any) *scope { return &scope{vars: vars, parent: s} }

// evaluate parses and evaluates an expression in a scope.
func (r *renderer) evaluate(source string, sc *scope) (any, error) {
	n, err := parseExpression(source)
	if err != nil {
		return nil, err
	}
	return r.eval(n, sc)
}

// eval evaluates an expression's node, counting its value against the
// render's limits.
func (r *renderer) eval(n node, sc *scope) (any, error) {
	v, err := r.evalNode(n, sc)
	if err == nil {
		err = r.charge(v)
	}
	return v, err
}

func (r *renderer) evalNode(n node, sc *scope) (any, error) {
	defer r.leave()
	if err := r.enter(); err != nil {
		return nil, err
	}
	switch n := n.(type) {
	case nil:
		return nil, errUndefinedNode()
	case *literalNode:
		switch n.tok.kind {
		case "number":
			return parseNumber(n.tok.value), nil
		case "string":
			return n.tok.value[1 : len(n.tok.value)-1], nil
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, nil
	case *contextNode:
		if v, ok := sc.lookup(n.name); ok {
			return v, nil
		}
		return nil, interpreterError("unknown context value " + n.name)
	case *unaryNode:
		return r.evalUnary(n, sc)
	case *binaryNode:
		return r.evalBinary(n, sc)
	case *dotNode:
		target, err := r.eval(n.target, sc)
		if err != nil {
			return nil, err
		}
		o, ok := asObject(target)
		if !ok {
			return nil, interpreterError("infix: . expects objects")
		}
		if v, ok := o[n.name]; ok {
			return v, nil
		}
		return nil, interpreterError(`object has no property "` + n.name + `"`)
	case *callNode:
		return r.evalCall(n, sc)
	case *listNode:
		list := make([]any, 0, len(n.items))
		if len(n.items) > 0 && n.items[0] != nil {
			for _, item := range n.items {
				v, err := r.eval(item, sc)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
		}
		return list, nil
	case *accessNode:
		return r.evalAccess(n, sc)
	case *objectNode:
		obj := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, err := r.eval(n.values[i], sc)
			if err != nil {
				return nil, err
			}
			obj[k] = v
		}
		return obj, nil
	}
	panic("jsone: unknown expression node")
}

func (r *renderer) evalUnary(n *unaryNode, sc *scope) (any, error) {
	v, err := r.eval(n.expr, sc)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "!":
		return !isTruthy(v), nil
	case "-":
		if f, ok := v.(float64); ok {
			return -f, nil
		}
		return nil, interpreterError("unary - expects number")
	}
	if f, ok := v.(float64); ok {
		return f, nil
	}
	return nil, interpreterError("unary + expects number")
}

func (r *renderer) evalBinary(n *binaryNode, sc *scope) (any, error) {
	left, err := r.eval(n.left, sc)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "||", "&&":
		if isTruthy(left) == (n.op == "||") {
			return n.op == "||", nil
		}
		right, err := r.eval(n.right, sc)
		if err != nil {
			return nil, err
		}
		return isTruthy(right), nil
	}
	right, err := r.eval(n.right, sc)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "==":
		return deepEqual(left, right), nil
	case "!=":
		return !deepEqual(left, right), nil
	case "in":
		return evalIn(left, right)
	case "<", ">", "<=", ">=":
		return compare(n.op, left, right)
	}
	return arithmetic(n.op, left, right)
}

func arithmetic(op string, left, right any) (any, error) {
	lf, lnum := left.(float64)
	rf, rnum := right.(float64)
	if op == "+" {
		ls, lstr := left.(string)
		rs, rstr := right.(string)
		switch {
		case lnum && rnum:
			return lf + rf, nil
		case lstr && rstr:
			return ls + rs, nil
		}
		return nil, interpreterError("infix: + expects numbers/strings + numbers/strings")
	}
	if !lnum || !rnum {
		return nil, interpreterError("infix: " + op + " expects number " + op + " number")
	}
	switch op {
	case "-":
		return lf - rf, nil
	case "*":
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, interpreterError("division by zero")
		}
		return lf / rf, nil
	}
	// "**": left is the exponent, right the base.
	return jsPow(rf, lf), nil
}

// jsPow is JavaScript's Math.pow, which differs from math.Pow where the
// base is ±1 and the exponent infinite or NaN.
func jsPow(base, exp float64) float64 {
	if math.IsNaN(exp) || (math.Abs(base) == 1 && math.IsInf(exp, 0)) {
		return math.NaN()
	}
	return math.Pow(base, exp)
}

func compare(op string, left, right any) (any, error) {
	var c int
	lf, lnum := left.(float64)
	rf, rnum := right.(float64)
	ls, lstr := left.(string)
	rs, rstr := right.(string)
	switch {
	case lnum && rnum:
		if math.IsNaN(lf) || math.IsNaN(rf) {
			return false, nil
		}
		switch {
		case lf < rf:
			c = -1
		case lf > rf:
			c = 1
		}
	case lstr && rstr:
		c = compareStrings(ls, rs)
	default:
		return nil, interpreterError("infix: " + op + " expects numbers/strings " + op + " numbers/strings")
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

func evalIn(left, right any) (any, error) {
	if o, ok := asObject(right); ok {
		s, ok := left.(string)
		if !ok {
			return nil, interpreterError("Infix: in-object expects string on left side")
		}
		_, found := o[s]
		return found, nil
	}
	if s, ok := right.(string); ok {
		l, ok := left.(string)
		if !ok {
			return nil, interpreterError("Infix: in-string expects string on left side")
		}
		return strings.Contains(s, l), nil
	}
	list, ok := right.([]any)
	if !ok {
		return nil, interpreterError("Infix: in expects Array, string, or object on right side")
	}
	for _, e := range list {
		if deepEqual(left, e) {
			return true, nil
		}
	}
	return false, nil
}

func (r *renderer) evalCall(n *callNode, sc *scope) (any, error) {
	callee, err := r.eval(n.callee, sc)
	if err != nil {
		return nil, err
	}
	fn, ok := callee.(*function)
	if !ok {
		return nil, interpreterError(toString(callee) + " is not callable")
	}
	args := make([]any, 0, len(n.args))
	for _, a := range n.args {
		v, err := r.eval(a, sc)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	return r.call(fn, args, sc)
}

// evalAccess is `target[index]` and `target[left:right]` on arrays and
// strings (by code point), and `target[key]` on objects.
func (r *renderer) evalAccess(n *accessNode, sc *scope) (any, error) {
	target, err := r.eval(n.target, sc)
	if err != nil {
		return nil, err
	}
	var left, right any = 0.0, nil
	if n.left != nil {
		if left, err = r.eval(n.left, sc); err != nil {
			return nil, err
		}
	}
	if n.right != nil {
		if right, err = r.eval(n.right, sc); err != nil {
			return nil, err
		}
	}
	switch t := target.(type) {
	case []any:
		lo, hi, err := indexes(n.interval, len(t), left, right)
		if err != nil {
			return nil, err
		}
		if n.interval {
			return append([]any{}, t[lo:hi]...), nil
		}
		return t[lo], nil
	case string:
		runes := []rune(t)
		if !utf8.ValidString(t) {
			runes = []rune(strings.ToValidUTF8(t, "\uFFFD"))
		}
		lo, hi, err := indexes(n.interval, len(runes), left, right)
		if err != nil {
			return nil, err
		}
		if n.interval {
			return string(runes[lo:hi]), nil
		}
		return string(runes[lo]), nil
	}
	o, ok := asObject(target)
	if !ok {
		return nil, interpreterError(`infix: "[..]" expects object, array, or string`)
	}
	key, ok := left.(string)
	if !ok {
		return nil, interpreterError("object keys must be strings")
	}
	if v, ok := o[key]; ok {
		return v, nil
	}
	return nil, nil
}

// indexes resolves an index (lo) or a slice (lo:hi) of a sequence of length
// n as the reference does: negative values count from the end and clamp at
// zero (so a[-10] is a[0]), a null right bound is the end, and a left bound
// past the right one is moved onto it before the bounds are checked to be
// integers (so a[1.5:1] is empty, not an error).
func indexes(interval bool, n int, left, right any) (lo, hi int, err error) {
	length := float64(n)
	l, lnum := left.(float64)
	if lnum && l < 0 {
		l = math.Max(length+l, 0)
	}
	if !interval {
		if !lnum || !isInteger(l) {
			return 0, 0, interpreterError("should only use integers to access arrays or strings")
		}
		if l >= length {
			return 0, 0, interpreterError("index out of bounds")
		}
		return int(l), 0, nil
	}
	if right == nil {
		right = length
	}
	rv, rnum := right.(float64)
	if rnum && rv < 0 {
		rv = math.Max(length+rv, 0)
	}
	if rnum {
		if lnum && l > rv {
			l = rv
		} else if !lnum {
			// JavaScript compares the other types as numbers; one below
			// zero has already become a string ("3-1") that compares false.
			if x := toNumber(left); !(x < 0) && x > rv {
				l, lnum = rv, true
			}
		}
	}
	if !lnum || !rnum || !isInteger(l) || !isInteger(rv) {
		return 0, 0, interpreterError("cannot perform interval access with non-integers")
	}
	l, rv = math.Min(l, length), math.Min(rv, length)
	if l > rv {
		l = rv
	}
	return int(l), int(rv), nil
}
