// Package regexfilter is an example filter plugin written the way an
// outside author would write one: it adds the expression type "REGEX" to
// a Quiver broker without touching Quiver's code. A consumer subscribes
// with
//
//	consumer.MessageSelector{Type: "REGEX", Expression: "color=^bl"}
//
// and the broker delivers the messages whose property color matches the
// regular expression ^bl (Go's RE2 syntax, unanchored unless the
// expression anchors itself). A message without the property never
// matches. The property name is everything before the first '=' (blanks
// around it are trimmed); TAGS and KEYS are properties like the others.
//
// RE2 runs in time linear in the input, so no expression can make the
// broker backtrack for ever; expressions are bounded by
// filter.regex.max_length.
//
// The plugin follows Quiver's plugin shape: a descriptor (Provider) with
// an ID, the expression type, NewConfig and New; a Config for its section
// filter.regex; and NewProvider, which a binary lists in its
// kernel.Plugins (see ../main.go). The plugin imports no fx.
package regexfilter

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
)

// ID is the plugin name (config section filter.regex).
const ID = "regex"

// Type is the expression type consumers name.
const Type = "REGEX"

// DefaultMaxLength is the default of Config.MaxLength.
const DefaultMaxLength = 1024

// Config is the filter.regex section.
type Config struct {
	// MaxLength is the longest expression, in bytes, that Compile
	// accepts (default 1024).
	MaxLength int `koanf:"max_length"`
}

// NewConfig returns the defaults.
func NewConfig() *Config { return &Config{MaxLength: DefaultMaxLength} }

// Validate checks the values.
func (c *Config) Validate() error {
	if c.MaxLength < 1 || c.MaxLength > 1<<16 {
		return fmt.Errorf("max_length: %d is outside 1..%d", c.MaxLength, 1<<16)
	}
	return nil
}

// Compiler compiles REGEX expressions.
type Compiler struct{ cfg Config }

var _ filter.Compiler = (*Compiler)(nil)

// NewCompiler returns a compiler; a nil cfg means the defaults.
func NewCompiler(cfg *Config) *Compiler {
	if cfg == nil {
		cfg = NewConfig()
	}
	return &Compiler{cfg: *cfg}
}

// Compile implements filter.Compiler. Errors are *filter.SyntaxError.
func (c *Compiler) Compile(expr string) (filter.Matcher, error) {
	fail := func(pos int, format string, args ...any) error {
		return &filter.SyntaxError{Type: Type, Expr: expr, Pos: pos, Expected: fmt.Sprintf(format, args...)}
	}
	if len(expr) > c.cfg.MaxLength {
		return nil, fail(c.cfg.MaxLength, "expected an expression of at most %d bytes (filter.regex.max_length), found %d", c.cfg.MaxLength, len(expr))
	}
	eq := strings.IndexByte(expr, '=')
	if eq < 0 {
		return nil, fail(len(expr), "expected property=regexp, found no '='")
	}
	name := strings.TrimSpace(expr[:eq])
	if name == "" {
		return nil, fail(eq, "expected a property name before '='")
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return nil, fail(strings.Index(expr, name)+i, "expected a property name without blanks or control characters")
	}
	re, err := regexp.Compile(expr[eq+1:])
	if err != nil {
		var rerr *syntax.Error
		if errors.As(err, &rerr) {
			return nil, fail(eq+1, "expected a regular expression: %s: %s", rerr.Code, rerr.Expr)
		}
		return nil, fail(eq+1, "expected a regular expression: %v", err)
	}
	return &Matcher{name: name, re: re}, nil
}

// Matcher is a compiled REGEX expression; it is safe for concurrent use.
type Matcher struct {
	name string
	re   *regexp.Regexp
}

var _ filter.Matcher = (*Matcher)(nil)

// Match implements filter.Matcher.
func (m *Matcher) Match(props message.Properties) bool {
	v, ok := props[m.name]
	return ok && m.re.MatchString(v)
}

// String returns the expression in canonical form.
func (m *Matcher) String() string { return m.name + "=" + m.re.String() }

// Provider is the plugin descriptor registered with the kernel.
type Provider = filter.Descriptor[Config]

// NewProvider returns the provider (filter.Define).
func NewProvider() *Provider {
	return filter.Define(ID, Type, NewConfig, func(c *Config) (filter.Compiler, error) {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("filter.regex: %w", err)
		}
		return NewCompiler(c), nil
	})
}
