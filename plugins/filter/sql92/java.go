package sql92

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// This file holds the Java library behaviour RocketMQ's evaluator relies
// on: Integer.valueOf, Long.valueOf, Double.valueOf, Boolean.valueOf and
// the compareTo methods. None of it allocates on success.

// parseJavaInt is Integer.valueOf (bits32) or Long.valueOf: an optional
// '+' or '-', then one or more decimal digits, in range. Java also takes
// non-ASCII Unicode digits (Character.digit); this takes ASCII only.
func parseJavaInt(s string, bits32 bool) (int64, bool) {
	if s == "" {
		return 0, false
	}
	i, neg := 0, false
	switch s[0] {
	case '-':
		neg, i = true, 1
	case '+':
		i = 1
	}
	if i == len(s) {
		return 0, false
	}
	limit := uint64(math.MaxInt64)
	if bits32 {
		limit = math.MaxInt32
	}
	if neg {
		limit++
	}
	var v uint64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		return -int64(v), true // wraps to MinInt64 for 2^63, as wanted
	}
	return int64(v), true
}

// parseJavaDouble is Double.valueOf: the string is trimmed of characters
// <= ' ' (String.trim), then an optional sign and "NaN", "Infinity", a
// decimal or a hexadecimal floating literal, the last two with an optional
// f, F, d or D suffix. Out-of-range values become ±Inf or 0, as in Java.
func parseJavaDouble(s string) (float64, bool) {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	s = s[i:j]
	if s == "" {
		return 0, false
	}
	k := 0
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg, k = s[0] == '-', 1
	}
	switch s[k:] {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	var end int
	var ok bool
	if len(s) > k+1 && s[k] == '0' && (s[k+1] == 'x' || s[k+1] == 'X') {
		end, ok = scanHexFloat(s, k+2)
	} else {
		end, ok = scanDecFloat(s, k)
	}
	if !ok {
		return 0, false
	}
	if end < len(s) {
		if end != len(s)-1 || !isFloatSuffix(s[end]) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(s[:end], 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isFloatSuffix(c byte) bool { return c == 'f' || c == 'F' || c == 'd' || c == 'D' }

func isRangeErr(err error) bool {
	return errors.Is(err, strconv.ErrRange)
}

// scanDecFloat scans digits [. digits] [e [sign] digits] from i (at least
// one mantissa digit) and returns where it stopped.
func scanDecFloat(s string, i int) (int, bool) {
	n := 0
	for i < len(s) && isDigit(s[i]) {
		i, n = i+1, n+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, n = i+1, n+1
		}
	}
	if n == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		m := 0
		for i < len(s) && isDigit(s[i]) {
			i, m = i+1, m+1
		}
		if m == 0 {
			return 0, false
		}
	}
	return i, true
}

// scanHexFloat scans hexdigits [. hexdigits] p [sign] digits from i, just
// after "0x" (Java requires the binary exponent).
func scanHexFloat(s string, i int) (int, bool) {
	n := 0
	for i < len(s) && isHex(s[i]) {
		i, n = i+1, n+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isHex(s[i]) {
			i, n = i+1, n+1
		}
	}
	if n == 0 || i >= len(s) || (s[i] != 'p' && s[i] != 'P') {
		return 0, false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	m := 0
	for i < len(s) && isDigit(s[i]) {
		i, m = i+1, m+1
	}
	if m == 0 {
		return 0, false
	}
	return i, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

// javaBool is Boolean.valueOf(String).
func javaBool(s string) bool { return strings.EqualFold(s, "true") }

// cmpDouble is Double.compare: -0.0 < 0.0, and NaN equals itself and is
// greater than everything else.
func cmpDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	ab, bb := javaDoubleBits(a), javaDoubleBits(b)
	switch {
	case ab == bb:
		return 0
	case ab < bb:
		return -1
	}
	return 1
}

// javaDoubleBits is Double.doubleToLongBits (one canonical NaN).
func javaDoubleBits(f float64) int64 {
	if f != f {
		return 0x7ff8000000000000
	}
	return int64(math.Float64bits(f))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpBool is Boolean.compareTo: false < true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
