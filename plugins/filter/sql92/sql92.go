// Package sql92 is RocketMQ's SQL92 expression filter: a subscription such
// as "a > 5 AND b = 'x' AND TAGS IN ('TagA', 'TagB')" is evaluated by the
// broker against each message's properties (user properties, TAGS, KEYS
// and the other system properties), so that only matching messages are
// delivered.
//
// # Grammar
//
// The grammar is RocketMQ's SelectorParser.jj (filter module), with the
// RocketMQ 5 string operators:
//
//	or         = and { OR and }
//	and        = equality { AND equality }
//	equality   = comparison { "=" comparison | "<>" comparison | IS [NOT] NULL }
//	comparison = unary { (">" | ">=" | "<" | "<=") unary
//	           | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//	           | [NOT] BETWEEN unary AND unary
//	           | [NOT] IN "(" string { "," string } ")" }
//	unary      = "+" unary | "-" unary | NOT unary | primary
//	primary    = string | integer | float | TRUE | FALSE | NULL | name | "(" or ")"
//
// Keywords are case-insensitive, property names are not. Names are
// [A-Za-z_$][A-Za-z0-9_$]*. Strings are single-quoted, ” is a quote.
// Integers are "0" or [1-9][0-9]* with an optional L, within a long;
// floats are 1.5, 1., .5, 1e10, 1.5E-3 within a double. Blanks are space,
// \t, \n, \r and \f; "-- ..." to the end of the line and "/* ... */" are
// comments.
//
// As in RocketMQ, NOT binds tighter than the comparisons: "NOT a = 'x'"
// is "(NOT a) = 'x'", which never matches, and "NOT a > 5" is refused;
// write "NOT (a = 'x')" or "a <> 'x'".
//
// # Semantics
//
// Evaluation follows RocketMQ's expression classes (ComparisonExpression,
// LogicExpression, UnaryExpression, UnaryInExpression) and its broker's
// ExpressionMessageFilter: a message matches when the expression evaluates
// to TRUE.
//
//   - Property values are strings; a missing property is null. Integer
//     literals are Java Integers (or Longs when they do not fit an int),
//     float literals Doubles.
//   - Three-valued logic: a comparison, IN or BETWEEN with a null operand
//     is null, NOT null is null, and null does not match. IS NULL and IS
//     NOT NULL are never null. AND and OR short-circuit left to right as in
//     Java (FALSE AND null is FALSE, TRUE OR null is TRUE).
//   - A property compared with a number is converted to that number's
//     class: Integer.valueOf for an int literal, Long.valueOf for a long,
//     Double.valueOf for a float. So "a > 5" takes a = "7" but not
//     a = "7.5" (write "a > 5.0"). Two properties ordered with > >= < <=
//     are both converted with Double.valueOf.
//   - When a conversion fails (a = "abc" in "a > 5") Java throws and the
//     broker treats the message as not matching: the whole expression is
//     abandoned, even "a > 5 OR TRUE", unless an earlier operand of an OR
//     was TRUE (or of an AND FALSE), which stops evaluation before it.
//   - '=' between strings is exact equality; '=' between a string and a
//     number converts as above. "a = TRUE" is true when a is "true" in any
//     case, and "a = FALSE" when a is anything else.
//   - '=' is asymmetric with nulls, as in Java: "a = 'x'" is null when a is
//     missing but "'x' = a" is FALSE (so "'x' <> a" matches), and "a = b"
//     is TRUE when both are missing.
//   - CONTAINS, STARTSWITH, ENDSWITH and their NOT forms are FALSE (not
//     null) for a missing property and for an empty search string, so
//     "NOT (a CONTAINS 'x')" matches a message without a, while
//     "a NOT CONTAINS 'x'" does not.
//   - TAGS is a property like the others ("TAGS IN ('A', 'B')"), so
//     Matcher does not implement filter.TagsCodeMatcher: the consume
//     queue's tag hash cannot rule a message out without false negatives.
//
// # Deviations from RocketMQ
//
//   - RocketMQ ignores anything after the longest valid prefix
//     ("a = 1 ) garbage" is "a = 1"); Quiver refuses it, so that a typo
//     cannot silently change a filter.
//   - RocketMQ refuses float literals that are 0 or underflow to 0
//     ("0.0 is less than 4.9E-324"); Quiver accepts them.
//   - A "--" comment may end at the end of the expression (RocketMQ needs
//     a line break), and "--" always starts a comment (RocketMQ reads
//     "--5" without a line break after it as two minus signs).
//   - Numbers in property values are ASCII (Java also takes other Unicode
//     digits), and strings compare by bytes (Java by UTF-16 code units,
//     which only differs for invalid UTF-8).
//
// # Limits
//
// Expressions longer than Config.MaxLength bytes, or nesting deeper than
// Config.MaxDepth (parentheses, prefixes and operator tree height), are
// refused with a *filter.SyntaxError, so that a subscription cannot make
// the broker parse or evaluate without bound. Evaluation does not
// allocate.
package sql92

import (
	"errors"
	"fmt"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
)

// ID is the plugin ID.
const ID = "sql92"

// ErrDisabled is what Compile returns when Config.Enabled is false
// (RocketMQ's enablePropertyFilter=false).
var ErrDisabled = errors.New("SQL92 filtering is disabled on this broker (filter.sql92.enabled=false)")

// Matcher is a compiled SQL92 expression. It is immutable, so one Matcher
// may be shared by any number of goroutines.
type Matcher struct {
	expr string
	root node
	all  bool
}

var (
	_ filter.Matcher    = (*Matcher)(nil)
	_ filter.AllMatcher = (*Matcher)(nil)
)

// Match reports whether the expression is TRUE for a message with these
// properties. It does not allocate.
func (m *Matcher) Match(props message.Properties) bool {
	v := m.root.eval(props)
	return v.k == kBool && v.b
}

// MatchesAll reports whether the expression is TRUE before looking at
// any property ("TRUE", "TRUE OR ...").
func (m *Matcher) MatchesAll() bool { return m.all }

// String returns the expression as written.
func (m *Matcher) String() string { return m.expr }

// Compiler compiles SQL92 expressions; it is the filter.Compiler the
// provider returns.
type Compiler struct {
	cfg Config
}

var _ filter.Compiler = (*Compiler)(nil)

// NewCompiler returns a compiler for cfg (nil means defaults). It does not
// validate cfg: Provider.New does.
func NewCompiler(cfg *Config) *Compiler {
	if cfg == nil {
		cfg = NewConfig()
	}
	return &Compiler{cfg: *cfg}
}

// Compile compiles expr with the default limits.
func Compile(expr string) (*Matcher, error) { return NewCompiler(nil).CompileMatcher(expr) }

// Compile implements filter.Compiler. Errors are *filter.SyntaxError, or
// ErrDisabled.
func (c *Compiler) Compile(expr string) (filter.Matcher, error) {
	m, err := c.CompileMatcher(expr)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// CompileMatcher is Compile returning the concrete type.
func (c *Compiler) CompileMatcher(expr string) (*Matcher, error) {
	if !c.cfg.Enabled {
		return nil, ErrDisabled
	}
	if len(expr) > c.cfg.MaxLength {
		return nil, &filter.SyntaxError{
			Type: filter.TypeSQL92, Expr: expr, Pos: c.cfg.MaxLength,
			Expected: fmt.Sprintf("expected an expression of at most %d bytes (filter.sql92.max_length), found %d", c.cfg.MaxLength, len(expr)),
		}
	}
	root, err := parse(expr, c.cfg.MaxDepth)
	if err != nil {
		return nil, err
	}
	m := &Matcher{expr: expr, root: root}
	if k, ok := root.(*constNode); ok && k.v.k == kBool && k.v.b {
		m.all = true
	}
	return m, nil
}

// Provider is the SQL92 filter descriptor registered with the kernel.
type Provider = filter.Descriptor[Config]

// NewProvider returns the provider (filter.Define).
func NewProvider() *Provider {
	return filter.Define(ID, filter.TypeSQL92, NewConfig, func(c *Config) (filter.Compiler, error) {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("filter.sql92: %w", err)
		}
		return NewCompiler(c), nil
	})
}
