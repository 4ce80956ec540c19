package jsone

import (
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// token is one lexeme of an expression: its kind (the operator itself for
// punctuation, or number, identifier, string, true, false, null, in), its
// text, and its byte offsets in the source.
type token struct {
	kind       string
	value      string
	start, end int
}

// punctuation in the order the reference tries it: the first that matches
// wins, so "**" comes before "*" and ">=" before ">".
var punctuation = []string{
	"**", "+", "-", "*", "/", "[", "]", ".", "(", ")", "{", "}", ":", ",",
	">=", "<=", "<", ">", "==", "!=", "!", "&&", "||",
}

// keywords are only keywords when no identifier character follows.
var keywords = []string{"true", "false", "in", "null"}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

// nextToken returns the token at offset in source, after any whitespace, or
// nil at the end of the source.
func nextToken(source string, offset int) (*token, error) {
	for offset < len(source) {
		r, n := utf8.DecodeRuneInString(source[offset:])
		if !jsvalue.IsSpace(r) {
			break
		}
		offset += n
	}
	if offset >= len(source) {
		return nil, nil
	}
	rest := source[offset:]
	tok := func(kind string, length int) (*token, error) {
		return &token{kind: kind, value: rest[:length], start: offset, end: offset + length}, nil
	}
	for _, p := range punctuation {
		if len(rest) >= len(p) && rest[:len(p)] == p {
			return tok(p, len(p))
		}
	}
	for _, k := range keywords {
		if len(rest) >= len(k) && rest[:len(k)] == k && (len(rest) == len(k) || !isIdentChar(rest[len(k)])) {
			return tok(k, len(k))
		}
	}
	c := rest[0]
	switch {
	case isDigit(c):
		i := 1
		for i < len(rest) && isDigit(rest[i]) {
			i++
		}
		if i+1 < len(rest) && rest[i] == '.' && isDigit(rest[i+1]) {
			i += 2
			for i < len(rest) && isDigit(rest[i]) {
				i++
			}
		}
		return tok("number", i)
	case isIdentStart(c):
		i := 1
		for i < len(rest) && isIdentChar(rest[i]) {
			i++
		}
		return tok("identifier", i)
	case c == '\'' || c == '"':
		for i := 1; i < len(rest); i++ {
			if rest[i] == c {
				return tok("string", i+1)
			}
		}
	}
	return nil, syntaxError("Unexpected input for '" + source + "' at '" + rest + "'")
}
