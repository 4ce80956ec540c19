package jsvalue

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected values below are what Node prints for the same inputs.

func TestNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want float64
	}{
		{"1700000000", 1700000000}, {" 17 ", 17}, {"\u00a0\ufeff17\u2028\u3000", 17}, {"", 0}, {" \t\n", 0},
		{"+5", 5}, {"-5", -5}, {"-0", math.Copysign(0, -1)}, {"1e3", 1000}, {"1E-3", 0.001}, {".5", 0.5}, {"5.", 5},
		{"0x10", 16}, {"0XfF", 255}, {"0o10", 8}, {"0b11", 3}, {"007", 7}, {"0.1e+2", 10},
		{"Infinity", math.Inf(1)}, {"+Infinity", math.Inf(1)}, {"-Infinity", math.Inf(-1)},
		{"1e400", math.Inf(1)}, {"-1e400", math.Inf(-1)}, {"1e-400", 0},
		{"0x1fffffffffffff1", 0x1fffffffffffff1},
	}
	for _, tt := range tests {
		got := Number(tt.in)
		require.Equal(t, tt.want, got, "Number(%q)", tt.in)
		require.Equal(t, math.Signbit(tt.want), math.Signbit(got), "sign of Number(%q)", tt.in)
	}
	for _, in := range []string{
		"abc", "1a", "--1", "+-1", "-0x10", "+0x10", "0x", "0x1g", "0b2", "0o8", "1e", "1e+", ".", "e5",
		"inf", "infinity", "-+Infinity", "NaN", "1_000", "0x1p3", "1 2", "\u200b1",
	} {
		require.True(t, math.IsNaN(Number(in)), "Number(%q) should be NaN", in)
	}
}

func TestParseInt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want float64
	}{
		{"1700000900", 1700000900}, {" 12abc", 12}, {"-3", -3}, {"\u2028-3", -3}, {"+4x", 4}, {"007", 7}, {"1e3", 1}, {"0x10", 0}, {"12.9", 12},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ParseInt(tt.in), "parseInt(%q)", tt.in)
	}
	for _, in := range []string{"", "abc", "-", " x1", "--1", "Infinity"} {
		require.True(t, math.IsNaN(ParseInt(in)), "parseInt(%q) should be NaN", in)
	}
}

func TestDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		base int
		want float64
	}{
		{"ff", 16, 255}, {"FF", 16, 255}, {"777", 8, 511}, {"101", 2, 5}, {"z", 36, 35}, {"10", 10, 10},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Digits(tt.in, tt.base), "%q in base %d", tt.in, tt.base)
	}
	for _, tt := range []struct {
		in   string
		base int
	}{{"", 10}, {"8", 8}, {"2", 2}, {"g", 16}, {"-1", 10}, {"\u0661", 10}} {
		require.True(t, math.IsNaN(Digits(tt.in, tt.base)), "%q in base %d should be NaN", tt.in, tt.base)
	}
}

func TestIsSpace(t *testing.T) {
	t.Parallel()
	for _, r := range Whitespace {
		require.True(t, IsSpace(r), "%U", r)
	}
	for _, r := range []rune{'a', '0', 0x85, 0x180e, 0x200b, 0x2027, 0x202a, 0x205e, 0xfffe} {
		require.False(t, IsSpace(r), "%U", r)
	}
}

func TestNumberString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1.5, "-1.5"}, {1700000000000, "1700000000000"},
		{1700000123.456, "1700000123.456"}, {0.30000000000000004, "0.30000000000000004"}, {0.000001, "0.000001"},
		{1e-7, "1e-7"}, {1.5, "1.5"}, {1.5e-7, "1.5e-7"}, {-1e-7, "-1e-7"}, {123e-20, "1.23e-18"}, {1e20, "100000000000000000000"},
		{999999999999999900000, "999999999999999900000"}, {1e21, "1e+21"}, {1.5e21, "1.5e+21"}, {-1.5e21, "-1.5e+21"},
		{5e-324, "5e-324"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{math.NaN(), "NaN"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, NumberString(tt.in), "%v", tt.in)
	}
}

func TestQuoteJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"", `""`}, {"scope:a*", `"scope:a*"`}, {`q"b\s`, `"q\"b\\s"`}, {"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f\""}, {"<>&\u2028\u2029é", "\"<>&\u2028\u2029é\""},
		{"a\xffb", "\"a\ufffdb\""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, QuoteJSON(tt.in), "%q", tt.in)
	}
}
