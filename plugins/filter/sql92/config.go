package sql92

import (
	"errors"
	"fmt"
)

// Defaults of the filter.sql92 section.
const (
	DefaultMaxLength = 4096
	DefaultMaxDepth  = 64
)

// Upper bounds for the limits, so that a configuration cannot turn them
// off: the parser and the evaluator recurse once per nesting level.
const (
	maxMaxLength = 1 << 20
	maxMaxDepth  = 10000
)

// Config is the filter.sql92 section.
type Config struct {
	// MaxLength is the longest expression, in bytes, that Compile
	// accepts (default 4096). Longer ones are a *filter.SyntaxError.
	MaxLength int `koanf:"max_length"`
	// MaxDepth bounds the nesting of an expression (default 64): the
	// number of nested parentheses, NOT and sign prefixes, and the height
	// of the compiled operator tree. Deeper ones are a *filter.SyntaxError.
	MaxDepth int `koanf:"max_depth"`
	// Enabled is RocketMQ's enablePropertyFilter (default true). When
	// false every Compile fails with ErrDisabled, so consumers
	// subscribing with SQL92 are refused.
	Enabled bool `koanf:"enabled"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{MaxLength: DefaultMaxLength, MaxDepth: DefaultMaxDepth, Enabled: true}
}

// Validate checks the values and reports every problem with its key.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxLength < 1 || c.MaxLength > maxMaxLength {
		errs = append(errs, fmt.Errorf("max_length: %d is outside 1..%d", c.MaxLength, maxMaxLength))
	}
	if c.MaxDepth < 1 || c.MaxDepth > maxMaxDepth {
		errs = append(errs, fmt.Errorf("max_depth: %d is outside 1..%d", c.MaxDepth, maxMaxDepth))
	}
	return errors.Join(errs...)
}
