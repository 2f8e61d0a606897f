package sql92

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	// Keywords (case-insensitive).
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	tContains
	tStartsWith
	tEndsWith
	// Literals and names.
	tDecimal
	tFloat
	tString
	tID
	// Punctuation.
	tEq
	tNe
	tGt
	tGe
	tLt
	tLe
	tLParen
	tComma
	tRParen
	tPlus
	tMinus
)

var keywords = map[string]tokKind{
	"NOT": tNot, "AND": tAnd, "OR": tOr, "BETWEEN": tBetween, "IN": tIn,
	"TRUE": tTrue, "FALSE": tFalse, "NULL": tNull, "IS": tIs,
	"CONTAINS": tContains, "STARTSWITH": tStartsWith, "ENDSWITH": tEndsWith,
}

type token struct {
	k    tokKind
	pos  int    // byte offset in the expression
	text string // the source text
	str  string // a string literal's value ('' decoded)
}

// describe names a token for error messages.
func (t token) describe() string {
	if t.k == tEOF {
		return "end of expression"
	}
	text := t.text
	if len(text) > 32 {
		text = text[:32] + "..."
	}
	return fmt.Sprintf("%q", text)
}

// lex splits an expression into tokens like RocketMQ's SelectorParser.jj:
// blanks are space, \t, \n, \r and \f; "--" starts a comment to the end of
// the line and /* */ encloses one; names are [A-Za-z_$][A-Za-z0-9_$]*;
// numbers follow DECIMAL_LITERAL ("0" or [1-9][0-9]* with an optional L)
// and FLOATING_POINT_LITERAL (5.5, 5., .5, 5E10, 5.5e-3), longest match
// first; strings are single-quoted with ” for a quote.
func lex(src string, errf func(pos int, format string, args ...any) error) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(src) {
			c := src[i]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' {
				i++
				continue
			}
			if c == '-' && i+1 < len(src) && src[i+1] == '-' {
				// A line comment; RocketMQ wants a line break after it,
				// Quiver also ends it at the end of the expression.
				j := strings.IndexAny(src[i:], "\r\n")
				if j < 0 {
					i = len(src)
				} else {
					i += j + 1
				}
				continue
			}
			if c == '/' && i+1 < len(src) && src[i+1] == '*' {
				j := strings.Index(src[i+2:], "*/")
				if j < 0 {
					return nil, errf(i, "expected \"*/\" to close the comment")
				}
				i += 2 + j + 2
				continue
			}
			break
		}
		if i >= len(src) {
			return append(toks, token{k: tEOF, pos: len(src)}), nil
		}
		start := i
		c := src[i]
		var k tokKind
		switch {
		case isIDStart(c):
			i++
			for i < len(src) && isIDPart(src[i]) {
				i++
			}
			k = tID
			if kw, ok := keywords[strings.ToUpper(src[start:i])]; ok {
				k = kw
			}
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			i, k = lexNumber(src, i)
		case c == '\'':
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					return nil, errf(start, "expected \"'\" to close the string literal")
				}
				if src[i] == '\'' {
					if i+1 < len(src) && src[i+1] == '\'' {
						b.WriteByte('\'')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(src[i])
				i++
			}
			toks = append(toks, token{k: tString, pos: start, text: src[start:i], str: b.String()})
			continue
		default:
			i++
			switch c {
			case '=':
				k = tEq
			case '<':
				k = tLt
				if i < len(src) && src[i] == '>' {
					k, i = tNe, i+1
				} else if i < len(src) && src[i] == '=' {
					k, i = tLe, i+1
				}
			case '>':
				k = tGt
				if i < len(src) && src[i] == '=' {
					k, i = tGe, i+1
				}
			case '(':
				k = tLParen
			case ',':
				k = tComma
			case ')':
				k = tRParen
			case '+':
				k = tPlus
			case '-':
				k = tMinus
			default:
				r, size := utf8.DecodeRuneInString(src[start:])
				if r == utf8.RuneError && size == 1 {
					return nil, errf(start, "unexpected byte 0x%02x (not UTF-8)", c)
				}
				hint := ""
				switch {
				case c == '!' && i < len(src) && src[i] == '=':
					hint = " (write <> for not equal)"
				case c == '"':
					hint = " (string literals use single quotes)"
				case c == '&' || c == '|':
					hint = " (write AND, OR)"
				}
				return nil, errf(start, "unexpected character %q%s", r, hint)
			}
		}
		toks = append(toks, token{k: k, pos: start, text: src[start:i]})
	}
}

func isIDStart(c byte) bool {
	return c|0x20 >= 'a' && c|0x20 <= 'z' || c == '_' || c == '$'
}

func isIDPart(c byte) bool { return isIDStart(c) || isDigit(c) }

// lexNumber scans a number at i (a digit, or '.' before a digit) and
// returns its end and kind, by JavaCC's longest match between
// DECIMAL_LITERAL and FLOATING_POINT_LITERAL.
func lexNumber(src string, i int) (int, tokKind) {
	start := i
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	float := false
	if i < len(src) && src[i] == '.' {
		float = true
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if j, ok := lexExponent(src, i); ok {
		return j, tFloat
	}
	if float {
		return i, tFloat
	}
	// DECIMAL_LITERAL: "0" alone, or [1-9][0-9]* [lL]?.
	if src[start] == '0' {
		return start + 1, tDecimal
	}
	if i < len(src) && (src[i] == 'l' || src[i] == 'L') {
		i++
	}
	return i, tDecimal
}

// lexExponent matches E [+-]? [0-9]+ at i.
func lexExponent(src string, i int) (int, bool) {
	if i >= len(src) || (src[i] != 'e' && src[i] != 'E') {
		return 0, false
	}
	i++
	if i < len(src) && (src[i] == '+' || src[i] == '-') {
		i++
	}
	j := i
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	if j == i {
		return 0, false
	}
	return j, true
}
