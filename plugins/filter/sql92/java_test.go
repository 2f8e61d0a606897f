package sql92

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseJavaInt(t *testing.T) {
	tests := []struct {
		give   string
		bits32 bool
		want   int64
		wantOK bool
	}{
		{"0", true, 0, true},
		{"7", true, 7, true},
		{"+7", true, 7, true},
		{"-7", true, -7, true},
		{"-0", true, 0, true},
		{"007", true, 7, true},
		{"2147483647", true, math.MaxInt32, true},
		{"-2147483648", true, math.MinInt32, true},
		{"2147483648", true, 0, false},
		{"-2147483649", true, 0, false},
		{"2147483648", false, 2147483648, true},
		{"9223372036854775807", false, math.MaxInt64, true},
		{"-9223372036854775808", false, math.MinInt64, true},
		{"9223372036854775808", false, 0, false},
		{"99999999999999999999", false, 0, false},
		{"", true, 0, false},
		{"+", true, 0, false},
		{"-", true, 0, false},
		{" 7", true, 0, false},
		{"7 ", true, 0, false},
		{"7.0", true, 0, false},
		{"1e3", true, 0, false},
		{"1_000", true, 0, false},
		{"0x10", true, 0, false},
		{"--7", true, 0, false},
		{"７", true, 0, false}, // Java takes fullwidth digits; Quiver does not
	}
	for _, tt := range tests {
		got, ok := parseJavaInt(tt.give, tt.bits32)
		assert.Equal(t, tt.wantOK, ok, "parseJavaInt(%q, %v)", tt.give, tt.bits32)
		if ok {
			assert.Equal(t, tt.want, got, "parseJavaInt(%q, %v)", tt.give, tt.bits32)
		}
	}
}

func TestParseJavaDouble(t *testing.T) {
	tests := []struct {
		give   string
		want   float64
		wantOK bool
	}{
		{"1", 1, true},
		{"1.5", 1.5, true},
		{"-1.5", -1.5, true},
		{"+1.5", 1.5, true},
		{".5", 0.5, true},
		{"5.", 5, true},
		{"1e3", 1000, true},
		{"1E+3", 1000, true},
		{"1.5e-3", 0.0015, true},
		{"  2.5\t\n", 2.5, true}, // String.trim
		{"\x002.5\x1f", 2.5, true},
		{"2.5f", 2.5, true},
		{"2.5D", 2.5, true},
		{"2d", 2, true},
		{"0x1p3", 8, true},
		{"0X1.8P1", 3, true},
		{"-0x1p-1", -0.5, true},
		{"0x1p3f", 8, true},
		{"1e400", math.Inf(1), true},
		{"-1e400", math.Inf(-1), true},
		{"1e-400", 0, true},
		{"Infinity", math.Inf(1), true},
		{"-Infinity", math.Inf(-1), true},
		{"+Infinity", math.Inf(1), true},
		{"", 0, false},
		{"   ", 0, false},
		{".", 0, false},
		{"e3", 0, false},
		{"1e", 0, false},
		{"1e+", 0, false},
		{"1.5ff", 0, false},
		{"1.5x", 0, false},
		{"inf", 0, false},
		{"infinity", 0, false},
		{"nan", 0, false},
		{"1_000", 0, false},
		{"0x1", 0, false}, // Java needs the binary exponent
		{"0x_1p1", 0, false},
		{"0x", 0, false},
		{"0xp1", 0, false},
		{"1 2", 0, false},
		{"\u00a01", 0, false}, // trim only drops <= ' '
		{"++1", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseJavaDouble(tt.give)
		assert.Equal(t, tt.wantOK, ok, "parseJavaDouble(%q)", tt.give)
		if ok {
			assert.Equal(t, tt.want, got, "parseJavaDouble(%q)", tt.give)
		}
	}
	for _, s := range []string{"NaN", "-NaN", "+NaN", " NaN "} {
		got, ok := parseJavaDouble(s)
		assert.True(t, ok && math.IsNaN(got), "parseJavaDouble(%q)", s)
	}
}

func TestCmpDouble(t *testing.T) {
	nan := math.NaN()
	assert.Equal(t, 0, cmpDouble(nan, nan))
	assert.Equal(t, 1, cmpDouble(nan, math.Inf(1)))
	assert.Equal(t, -1, cmpDouble(math.Inf(1), nan))
	assert.Equal(t, -1, cmpDouble(math.Copysign(0, -1), 0))
	assert.Equal(t, 1, cmpDouble(0, math.Copysign(0, -1)))
	assert.Equal(t, 0, cmpDouble(1.5, 1.5))
	assert.Equal(t, -1, cmpDouble(-1, 1))
}

// TestJavaCompare pins __compare's conversions, including the classes a
// literal-only expression can produce.
func TestJavaCompare(t *testing.T) {
	str := func(s string) value { return value{k: kString, s: s} }
	i := func(v int64) value { return value{k: kInt, i: v} }
	l := func(v int64) value { return value{k: kLong, i: v} }
	d := func(v float64) value { return value{k: kDouble, f: v} }
	tests := []struct {
		name   string
		l, r   value
		want   int
		wantOK bool
	}{
		{"string string", str("a"), str("b"), -1, true},
		{"string int", str("7"), i(5), 1, true},
		{"string int overflow", str("3000000000"), i(5), 0, false},
		{"string long", str("3000000000"), l(5), 1, true},
		{"string double", str("5.5"), d(5.5), 0, true},
		{"string bad int", str("x"), i(5), 0, false},
		{"string true", str("TrUe"), vTrue, 0, true},
		{"string false", str("nope"), vFalse, 0, true},
		{"true string", vTrue, str("true"), 0, false},
		{"bool int", vTrue, i(1), -1, true},
		{"int bool", i(1), vTrue, -1, true},
		{"int long", i(1), l(1), 0, true},
		{"long int", l(3000000000), i(1), 1, true},
		{"int double", i(1), d(1.5), -1, true},
		{"double long", d(1.5), l(1), 1, true},
		{"double string", d(1.5), str("1.5"), 0, true},
		{"double bool", d(1.5), vFalse, -1, true},
		{"false true", vFalse, vTrue, -1, true},
	}
	for _, tt := range tests {
		got, ok := javaCompare(tt.l, tt.r)
		assert.Equal(t, tt.wantOK, ok, tt.name)
		if ok {
			assert.Equal(t, tt.want, got, tt.name)
		}
	}
}
