package auth

import (
	"math"
	"strconv"
	"strings"
)

// jsNumberString formats f as JavaScript's String(number) does, which is
// what Taskcluster's string concatenations produce ("start:" + cert.start,
// takenUntil/1000 in task credential names, numeric template parameters):
// the shortest round-tripping digits, in plain notation between 1e-6 and
// 1e21 and in exponent notation ("1e+21", "1e-7") outside.
func jsNumberString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mantissa, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	return mantissa + "e" + string(sign) + exp
}
