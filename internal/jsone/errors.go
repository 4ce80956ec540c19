package jsone

import (
	"errors"
	"sort"
	"strings"
)

// Error is a failed render. Its message is the reference implementation's
// err.toString(): "TemplateError at template.a[0]: message" for JSON-e's own
// errors (TemplateError, InterpreterError, SyntaxError, BuiltinError), and
// for the few failures the reference leaves to JavaScript itself
// ("TypeError: ...", "RangeError: ...", "Error: ..."), JavaScript's text.
type Error struct {
	// Kind is the error's class: TemplateError, InterpreterError,
	// SyntaxError, BuiltinError, or TypeError, RangeError, Error.
	Kind string
	// Message is the error's message without its kind or location.
	Message string
	// Location is where in the template the error arose, as a JavaScript
	// accessor path (".task.payload[0]"); empty at the top level or for
	// JavaScript's own errors, which the reference does not locate.
	Location string
}

// Error returns the message as the reference implementation prints it.
func (e *Error) Error() string {
	if e.Location != "" {
		return e.Kind + " at template" + e.Location + ": " + e.Message
	}
	return e.Kind + ": " + e.Message
}

// locatable reports whether the reference records template locations for
// this kind of error (only JSON-e's own errors carry them).
func (e *Error) locatable() bool {
	switch e.Kind {
	case "TemplateError", "InterpreterError", "SyntaxError", "BuiltinError":
		return true
	}
	return false
}

func templateError(msg string) error    { return &Error{Kind: "TemplateError", Message: msg} }
func interpreterError(msg string) error { return &Error{Kind: "InterpreterError", Message: msg} }
func syntaxError(msg string) error      { return &Error{Kind: "SyntaxError", Message: msg} }
func builtinError(msg string) error     { return &Error{Kind: "BuiltinError", Message: msg} }

// typeError is what JavaScript throws when the reference reads a property of
// null or undefined: some malformed expressions fail this way there, and
// hopper reports the same text.
func typeError(msg string) error { return &Error{Kind: "TypeError", Message: msg} }

// errUndefinedNode is evaluating a part of an expression the parser left out
// (as in "[1,]"), which the reference fails on.
func errUndefinedNode() error {
	return typeError("Cannot read properties of undefined (reading 'constructorName')")
}

// withLocation prefixes loc to a JSON-e error's location, as the reference
// does while an error travels out through arrays and objects.
func withLocation(err error, loc string) error {
	var e *Error
	if errors.As(err, &e) && e.locatable() {
		e.Location = loc + e.Location
	}
	return err
}

// unexpectedToken is the parser's "Found: X token, expected one of: ...".
func unexpectedToken(tok *token, expected ...string) error {
	if tok == nil {
		return typeError("Cannot read properties of null (reading 'value')")
	}
	sorted := append([]string(nil), expected...)
	sort.Strings(sorted)
	return syntaxError("Found: " + tok.value + " token, expected one of: " + strings.Join(sorted, ", "))
}

// expressionStart lists the tokens that can begin an expression.
var expressionStart = []string{"!", "(", "+", "-", "[", "false", "identifier", "null", "number", "string", "true", "{"}

// afterExpression lists the tokens that can follow a complete expression,
// for the error on trailing input.
var afterExpression = []string{"!=", "&&", "(", "*", "**", "+", "-", ".", "/", "<", "<=", "==", ">", ">=", "[", "in", "||"}
