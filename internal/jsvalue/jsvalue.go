// Package jsvalue converts between strings and numbers exactly as
// JavaScript does. It exists because hopper must reproduce those
// conversions byte for byte wherever Taskcluster's Node services apply them:
// Hawk reads its ts and exp attributes with Number() and parseInt(), the
// Auth service signs temporary credentials over String(number) and prints
// scope expressions with JSON.stringify, and JSON-e renders numbers and
// strings the way its JavaScript reference does. One copy keeps those
// callers from drifting apart. It depends on no other hopper package.
package jsvalue

import (
	"math"
	"strconv"
	"strings"
)

// Whitespace is the set JavaScript trims around a number and with
// String.prototype.trim: its WhiteSpace and LineTerminator code points.
const Whitespace = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

// SpaceClass is Whitespace as a regular expression character class.
const SpaceClass = `[\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]`

// IsSpace reports whether r is in Whitespace (JavaScript's `\s`).
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// Number converts s as JavaScript's Number(s) does: surrounding whitespace
// is ignored, an empty string is 0, unsigned 0x/0o/0b prefixes give
// integers, one optional sign may precede a decimal literal or Infinity,
// and anything else is NaN.
func Number(s string) float64 {
	s = strings.TrimFunc(s, IsSpace)
	if s == "" {
		return 0
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			return Digits(s[2:], base)
		}
	}
	body := s
	if body[0] == '+' || body[0] == '-' {
		body = body[1:]
	}
	if body == "Infinity" {
		if s[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	if !isDecimalLiteral(body) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return math.NaN()
	}
	// On a range error ParseFloat gives ±Inf or ±0, as JavaScript does.
	return f
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// isDecimalLiteral reports whether s is an unsigned StrDecimalLiteral other
// than Infinity: digits [. digits] [e [+-] digits], where either side of the
// point may be empty but not both.
func isDecimalLiteral(s string) bool {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && isDigit(s[i]) {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Digits reads s as an unsigned integer in base (2 to 36): NaN if s is
// empty or any character is not a digit of base; large values round as
// JavaScript's do, digit by digit to the nearest float.
func Digits(s string, base int) float64 {
	if s == "" {
		return math.NaN()
	}
	f := 0.0
	for i := 0; i < len(s); i++ {
		d := digitValue(s[i])
		if d < 0 || d >= base {
			return math.NaN()
		}
		f = f*float64(base) + float64(d)
	}
	return f
}

func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return -1
}

// ParseInt converts s as JavaScript's parseInt(s, 10) does: leading
// whitespace and one sign are skipped, then the longest run of decimal
// digits is read and the rest ignored; NaN if there is no digit.
func ParseInt(s string) float64 {
	s = strings.TrimLeftFunc(s, IsSpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	end := 0
	for end < len(s) && isDigit(s[end]) {
		end++
	}
	if end == 0 {
		return math.NaN()
	}
	v := Digits(s[:end], 10)
	if neg {
		return -v
	}
	return v
}
