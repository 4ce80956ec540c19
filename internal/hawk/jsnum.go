package hawk

import (
	"math"
	"strconv"
	"strings"
)

// jsWhitespace is the set JavaScript trims when converting strings to
// numbers (WhiteSpace and LineTerminator code points).
const jsWhitespace = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

// jsNumber converts s as JavaScript's Number(s) does (NaN when not numeric).
// Hawk multiplies the ts attribute string by 1000, which applies exactly
// this conversion.
func jsNumber(s string) float64 {
	s = strings.Trim(s, jsWhitespace)
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
			return parseDigits(s[2:], base)
		}
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return math.NaN()
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
	if err != nil {
		// Only range errors remain possible; ParseFloat then returns ±Inf
		// or 0, which is what JavaScript yields too.
		return f
	}
	return f
}

// isDecimalLiteral reports whether s is an unsigned JavaScript
// StrDecimalLiteral other than Infinity: digits with an optional fraction
// (either side of the dot may be empty, not both) and optional exponent.
func isDecimalLiteral(s string) bool {
	i, digits := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
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
		expDigits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			expDigits++
		}
		if expDigits == 0 {
			return false
		}
	}
	return i == len(s)
}

func parseDigits(s string, base int) float64 {
	if s == "" {
		return math.NaN()
	}
	v := 0.0
	for i := 0; i < len(s); i++ {
		d := digitValue(s[i])
		if d < 0 || d >= base {
			return math.NaN()
		}
		v = v*float64(base) + float64(d)
	}
	return v
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

// jsParseInt converts s as JavaScript's parseInt(s, 10) does: leading
// whitespace and a sign are skipped, then the longest run of decimal digits
// is used; NaN if there is none.
func jsParseInt(s string) float64 {
	s = strings.TrimLeft(s, jsWhitespace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return math.NaN()
	}
	v := parseDigits(s[:end], 10)
	if neg {
		return -v
	}
	return v
}
