package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

type engineConfig struct{ Size int }

// TestDefine: the descriptor hands open a *C: the defaults for nil, the
// caller's own for a *C, and refuses another type with ErrBadArgument,
// naming the type it wants, without calling open.
func TestDefine(t *testing.T) {
	var got *engineConfig
	calls := 0
	d := store.Define("mem", func() *engineConfig { return &engineConfig{Size: 64} },
		func(_ context.Context, c *engineConfig, _ store.Deps) (store.Store, error) {
			got, calls = c, calls+1
			return nil, nil
		})
	var p store.Provider = d
	assert.Equal(t, "mem", p.ID())
	assert.Equal(t, &engineConfig{Size: 64}, p.NewConfig())

	_, err := p.Open(context.Background(), nil, store.Deps{})
	require.NoError(t, err)
	assert.Equal(t, &engineConfig{Size: 64}, got, "nil means the defaults")

	mine := &engineConfig{Size: 1}
	_, err = p.Open(context.Background(), mine, store.Deps{})
	require.NoError(t, err)
	assert.Same(t, mine, got)

	_, err = p.Open(context.Background(), &struct{ Size int }{}, store.Deps{})
	assert.ErrorIs(t, err, store.ErrBadArgument)
	assert.EqualError(t, err, "storage.mem: config is *struct { Size int }, want *store_test.engineConfig: store: bad argument")
	assert.Equal(t, 2, calls, "open is not called with a config of the wrong type")

	c, err := d.Config((*engineConfig)(nil))
	require.NoError(t, err)
	assert.Equal(t, &engineConfig{Size: 64}, c)
	assert.Panics(t, func() { store.Define[engineConfig]("", nil, nil) })
}
