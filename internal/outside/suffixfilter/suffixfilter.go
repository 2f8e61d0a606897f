// Package suffixfilter is an out-of-tree filter plugin: it adds the
// expression type SUFFIX, which matches a message whose KEYS property has
// a key ending with the expression ("-eu" matches keys "order-1-eu").
// It lives outside Quiver's module on purpose (see package outside).
package suffixfilter

import (
	"fmt"
	"strings"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
)

// ID is the plugin name (config section filter.suffix).
const ID = "suffix"

// Type is the expression type consumers name.
const Type = "SUFFIX"

// Config is the filter.suffix section.
type Config struct {
	// MaxLength is the longest suffix accepted (default 64).
	MaxLength int `koanf:"max_length"`
}

// NewConfig returns the defaults.
func NewConfig() *Config { return &Config{MaxLength: 64} }

// Provider is the plugin descriptor.
type Provider = filter.Descriptor[Config]

// NewProvider returns the provider.
func NewProvider() *Provider {
	return filter.Define(ID, Type, NewConfig, func(c *Config) (filter.Compiler, error) {
		if c.MaxLength < 1 {
			return nil, fmt.Errorf("filter.suffix: max_length %d is below 1", c.MaxLength)
		}
		return compiler{max: c.MaxLength}, nil
	})
}

type compiler struct{ max int }

// Compile implements filter.Compiler.
func (c compiler) Compile(expr string) (filter.Matcher, error) {
	if expr == "" || len(expr) > c.max || strings.ContainsAny(expr, " \t") {
		return nil, &filter.SyntaxError{Type: Type, Expr: expr, Pos: 0,
			Expected: fmt.Sprintf("a suffix of 1..%d bytes without blanks", c.max)}
	}
	return matcher(expr), nil
}

type matcher string

// Match implements filter.Matcher.
func (m matcher) Match(props message.Properties) bool {
	for _, k := range strings.Fields(props[message.PropertyKeys]) {
		if strings.HasSuffix(k, string(m)) {
			return true
		}
	}
	return false
}
