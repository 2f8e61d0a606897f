package filter_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
)

type exprConfig struct{ MaxLength int }

type compiler struct{ cfg *exprConfig }

func (compiler) Compile(string) (filter.Matcher, error) { return nil, errors.New("unused") }

// TestDefine: New hands its function a *C: the defaults for nil, the
// caller's own for a *C; another type is ErrBadConfig naming the type
// wanted; the function's own error (validation) comes back as it is.
func TestDefine(t *testing.T) {
	errInvalid := errors.New("filter.x: max_length must be positive")
	d := filter.Define("x", "X", func() *exprConfig { return &exprConfig{MaxLength: 8} },
		func(c *exprConfig) (filter.Compiler, error) {
			if c.MaxLength < 1 {
				return nil, errInvalid
			}
			return compiler{cfg: c}, nil
		})
	var p filter.Provider = d
	assert.Equal(t, "x", p.ID())
	assert.Equal(t, "X", p.Type())
	assert.Equal(t, &exprConfig{MaxLength: 8}, p.NewConfig())

	c, err := p.New(nil)
	require.NoError(t, err)
	assert.Equal(t, &exprConfig{MaxLength: 8}, c.(compiler).cfg, "nil means the defaults")
	mine := &exprConfig{MaxLength: 3}
	c, err = p.New(mine)
	require.NoError(t, err)
	assert.Same(t, mine, c.(compiler).cfg)
	_, err = p.New(&exprConfig{})
	assert.ErrorIs(t, err, errInvalid)

	c, err = p.New(map[string]any{"max_length": 3})
	assert.Nil(t, c)
	assert.ErrorIs(t, err, filter.ErrBadConfig)
	assert.EqualError(t, err, "filter.x: config is map[string]interface {}, want *filter_test.exprConfig: filter: bad config")
}
