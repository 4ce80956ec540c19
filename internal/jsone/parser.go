package jsone

import (
	"slices"
	"strconv"
)

// Expression syntax trees. A nil node is a part the grammar allowed to be
// missing (the reference's `undefined`): evaluating it is an error.
type (
	// literalNode is a number, string, true, false or null.
	literalNode struct{ tok *token }
	// contextNode names a context value.
	contextNode struct{ name string }
	unaryNode   struct {
		op   string
		expr node
	}
	// binaryNode is an infix operator. For "**" left holds the exponent
	// and right the base (the reference builds it so, and evaluates the
	// exponent first).
	binaryNode struct {
		op          string
		left, right node
	}
	// dotNode is `target.name`.
	dotNode struct {
		target node
		name   string
	}
	callNode struct {
		callee node
		args   []node
	}
	listNode   struct{ items []node }
	accessNode struct {
		target      node
		interval    bool
		left, right node
	}
	// objectNode keeps its keys in JavaScript property order.
	objectNode struct {
		keys   []string
		values []node
	}
)

type node any

// precedence lists the infix operators from the loosest to the tightest.
var precedence = [][]string{{"||"}, {"&&"}, {"in"}, {"==", "!="}, {"<", ">", "<=", ">="}, {"+", "-"}, {"*", "/"}, {"**"}}

// parser is a recursive-descent parser over a lazily tokenized source, as
// the reference's: it reads a token only when the previous one is consumed,
// so `${expr}` parsing stops at the closing brace whatever follows it.
type parser struct {
	source string
	cur    *token
	depth  int
}

// maxDepth bounds the parser's recursion (about nine levels per nested
// bracket). The reference runs out of JavaScript stack somewhere past a few
// thousand brackets; a Go stack would grow until the process dies, so
// hopper stops at about a thousand, with JavaScript's message.
const maxDepth = 10000

// enter counts one level of recursion; the caller defers leave.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return &Error{Kind: "RangeError", Message: "Maximum call stack size exceeded"}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func newParser(source string) (*parser, error) {
	tok, err := nextToken(source, 0)
	if err != nil {
		return nil, err
	}
	return &parser{source: source, cur: tok}, nil
}

// errNullKind is reading the kind of a token past the end of the source.
func errNullKind() error { return typeError("Cannot read properties of null (reading 'kind')") }

// take consumes the current token, which must be of one of kinds.
func (p *parser) take(kinds ...string) error {
	if p.cur == nil {
		return syntaxError("Unexpected end of input")
	}
	if !slices.Contains(kinds, p.cur.kind) {
		return unexpectedToken(p.cur, kinds...)
	}
	next, err := nextToken(p.source, p.cur.end)
	if err != nil {
		return err
	}
	p.cur = next
	return nil
}

func (p *parser) is(kind string) bool { return p.cur != nil && p.cur.kind == kind }

// parse parses operators of precedence level and tighter.
func (p *parser) parse(level int) (node, error) {
	defer p.leave()
	if err := p.enter(); err != nil {
		return nil, err
	}
	if level == len(precedence)-1 {
		n, err := p.parsePostfix()
		if err != nil {
			return nil, err
		}
		for p.cur != nil && slices.Contains(precedence[level], p.cur.kind) {
			op := p.cur.kind
			if err := p.take(op); err != nil {
				return nil, err
			}
			exponent, err := p.parse(level)
			if err != nil {
				return nil, err
			}
			n = &binaryNode{op: op, left: exponent, right: n}
		}
		return n, nil
	}
	n, err := p.parse(level + 1)
	if err != nil {
		return nil, err
	}
	for p.cur != nil && slices.Contains(precedence[level], p.cur.kind) {
		op := p.cur.kind
		if err := p.take(op); err != nil {
			return nil, err
		}
		right, err := p.parse(level + 1)
		if err != nil {
			return nil, err
		}
		n = &binaryNode{op: op, left: n, right: right}
	}
	return n, nil
}

// parsePostfix parses a unit followed by any indexing, slicing, property
// access or call.
func (p *parser) parsePostfix() (node, error) {
	n, err := p.parseUnit()
	if err != nil {
		return nil, err
	}
	for p.cur != nil {
		switch p.cur.kind {
		case "[":
			n, err = p.parseAccess(n)
		case ".":
			if err = p.take("."); err != nil {
				return nil, err
			}
			name := p.cur
			if err = p.take("identifier"); err != nil {
				return nil, err
			}
			n = &dotNode{target: n, name: name.value}
		case "(":
			n, err = p.parseCall(n)
		default:
			return n, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseUnit() (node, error) {
	defer p.leave()
	if err := p.enter(); err != nil {
		return nil, err
	}
	tok := p.cur
	if tok == nil {
		return nil, errNullKind()
	}
	switch tok.kind {
	case "-", "+", "!":
		if err := p.take(tok.kind); err != nil {
			return nil, err
		}
		expr, err := p.parseUnit()
		if err != nil {
			return nil, err
		}
		return &unaryNode{op: tok.kind, expr: expr}, nil
	case "number", "null", "true", "false", "string":
		if err := p.take(tok.kind); err != nil {
			return nil, err
		}
		return &literalNode{tok: tok}, nil
	case "identifier":
		if err := p.take(tok.kind); err != nil {
			return nil, err
		}
		return &contextNode{name: tok.value}, nil
	case "(":
		if err := p.take("("); err != nil {
			return nil, err
		}
		n, err := p.parse(0)
		if err != nil {
			return nil, err
		}
		if n == nil {
			return nil, unexpectedToken(p.cur, expressionStart...)
		}
		if err := p.take(")"); err != nil {
			return nil, err
		}
		return n, nil
	case "[":
		return p.parseList()
	case "{":
		return p.parseObject()
	}
	return nil, nil
}

// parseItems parses `expr (, expr)*` up to the closing token, which the
// caller consumes. A call's arguments stop at the end of the source; a
// list's items read past it (and fail as the reference does).
func (p *parser) parseItems(closing string) ([]node, error) {
	if p.cur == nil {
		return nil, errNullKind()
	}
	var items []node
	if p.cur.kind == closing {
		return items, nil
	}
	n, err := p.parse(0)
	if err != nil {
		return nil, err
	}
	items = append(items, n)
	for {
		if p.cur == nil {
			if closing == "]" {
				return nil, errNullKind()
			}
			return items, nil
		}
		if p.cur.kind != "," {
			return items, nil
		}
		if items[len(items)-1] == nil {
			return nil, unexpectedToken(p.cur, expressionStart...)
		}
		if err := p.take(","); err != nil {
			return nil, err
		}
		n, err := p.parse(0)
		if err != nil {
			return nil, err
		}
		items = append(items, n)
	}
}

func (p *parser) parseCall(callee node) (node, error) {
	if err := p.take("("); err != nil {
		return nil, err
	}
	args, err := p.parseItems(")")
	if err != nil {
		return nil, err
	}
	if err := p.take(")"); err != nil {
		return nil, err
	}
	return &callNode{callee: callee, args: args}, nil
}

func (p *parser) parseList() (node, error) {
	if err := p.take("["); err != nil {
		return nil, err
	}
	items, err := p.parseItems("]")
	if err != nil {
		return nil, err
	}
	if err := p.take("]"); err != nil {
		return nil, err
	}
	return &listNode{items: items}, nil
}

// parseAccess parses `[index]` or `[left:right]` after target.
func (p *parser) parseAccess(target node) (node, error) {
	if err := p.take("["); err != nil {
		return nil, err
	}
	if p.cur == nil {
		return nil, errNullKind()
	}
	if p.cur.kind == "]" {
		return nil, unexpectedToken(p.cur, expressionStart...)
	}
	a := &accessNode{target: target}
	var err error
	if p.cur.kind != ":" {
		if a.left, err = p.parse(0); err != nil {
			return nil, err
		}
	}
	if p.cur == nil {
		return nil, errNullKind()
	}
	if p.cur.kind == ":" {
		a.interval = true
		if err := p.take(":"); err != nil {
			return nil, err
		}
	}
	if p.cur == nil {
		return nil, errNullKind()
	}
	// Without a colon, an expression here is parsed and then ignored, as
	// the reference does ("a[1 2]" is a[1]).
	if p.cur.kind != "]" {
		if a.right, err = p.parse(0); err != nil {
			return nil, err
		}
	}
	if a.interval && a.right == nil && p.cur != nil && p.cur.kind != "]" {
		return nil, unexpectedToken(p.cur, expressionStart...)
	}
	if err := p.take("]"); err != nil {
		return nil, err
	}
	return a, nil
}

func (p *parser) parseObject() (node, error) {
	if err := p.take("{"); err != nil {
		return nil, err
	}
	obj := &objectNode{}
	for p.cur != nil && (p.cur.kind == "string" || p.cur.kind == "identifier") {
		key := p.cur.value
		if p.cur.kind == "string" {
			key = key[1 : len(key)-1]
		}
		if err := p.take(p.cur.kind); err != nil {
			return nil, err
		}
		if err := p.take(":"); err != nil {
			return nil, err
		}
		value, err := p.parse(0)
		if err != nil {
			return nil, err
		}
		if value == nil {
			return nil, unexpectedToken(p.cur, expressionStart...)
		}
		obj.set(key, value)
		if p.is("}") {
			break
		}
		if err := p.take(","); err != nil {
			return nil, err
		}
	}
	if err := p.take("}"); err != nil {
		return nil, err
	}
	obj.order()
	return obj, nil
}

// set adds or replaces a key; a replaced key keeps its first position.
func (o *objectNode) set(key string, value node) {
	if i := slices.Index(o.keys, key); i >= 0 {
		o.values[i] = value
		return
	}
	o.keys = append(o.keys, key)
	o.values = append(o.values, value)
}

// order puts integer keys first, ascending, as JavaScript lists them.
func (o *objectNode) order() {
	idx := make([]int, len(o.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		an, aok := arrayIndex(o.keys[a])
		bn, bok := arrayIndex(o.keys[b])
		switch {
		case aok && bok:
			return int(an) - int(bn)
		case aok:
			return -1
		case bok:
			return 1
		}
		return 0
	})
	keys := make([]string, len(idx))
	values := make([]node, len(idx))
	for i, j := range idx {
		keys[i], values[i] = o.keys[j], o.values[j]
	}
	o.keys, o.values = keys, values
}

// parseExpression parses a whole source, as `$eval` and friends do.
func parseExpression(source string) (node, error) {
	p, err := newParser(source)
	if err != nil {
		return nil, err
	}
	n, err := p.parse(0)
	if err != nil {
		return nil, err
	}
	if p.cur != nil {
		return nil, syntaxError("Found: " + p.cur.value + " token, expected one of: " + joinComma(afterExpression))
	}
	return n, nil
}

// parseInterpolation parses the expression of a `${...}` at the start of
// source and returns it with the offset of its closing brace.
func parseInterpolation(source string) (node, int, error) {
	p, err := newParser(source)
	if err != nil {
		return nil, 0, err
	}
	n, err := p.parse(0)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case p.cur == nil:
		return nil, 0, syntaxError("unterminated ${..} expression")
	case p.cur.kind != "}":
		return nil, 0, syntaxError("Found: " + p.cur.value + " token, expected one of: " + joinComma(afterExpression))
	}
	return n, p.cur.start, nil
}

func joinComma(s []string) string {
	out := ""
	for i, e := range s {
		if i > 0 {
			out += ", "
		}
		out += e
	}
	return out
}

// parseNumber reads a number token's text (digits, optionally a fraction).
func parseNumber(text string) float64 {
	f, _ := strconv.ParseFloat(text, 64)
	return f
}
