package transport_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport"
)

type linkConfig struct{ Port int }

// TestDefine: Listen and Dial hand their functions a *C: the defaults for
// nil, the caller's own for a *C; another type is ErrBadConfig naming the
// type wanted, and the function is not called.
func TestDefine(t *testing.T) {
	var listened, dialed *linkConfig
	d := transport.Define("mem", func() *linkConfig { return &linkConfig{Port: 1} },
		func(_ context.Context, _ string, c *linkConfig, _ transport.Deps) (transport.Listener, error) {
			listened = c
			return nil, nil
		},
		func(_ context.Context, _ string, c *linkConfig, _ transport.Deps) (transport.Conn, error) {
			dialed = c
			return nil, nil
		})
	var p transport.Provider = d
	assert.Equal(t, "mem", p.ID())
	assert.Equal(t, &linkConfig{Port: 1}, p.NewConfig())
	ctx := context.Background()

	_, err := p.Listen(ctx, "a", nil, transport.Deps{})
	require.NoError(t, err)
	assert.Equal(t, &linkConfig{Port: 1}, listened, "nil means the defaults")
	mine := &linkConfig{Port: 2}
	_, err = p.Dial(ctx, "a", mine, transport.Deps{})
	require.NoError(t, err)
	assert.Same(t, mine, dialed)

	listened, dialed = nil, nil
	_, err = p.Listen(ctx, "a", linkConfig{}, transport.Deps{})
	assert.ErrorIs(t, err, transport.ErrBadConfig)
	assert.EqualError(t, err, "transport.mem: config is transport_test.linkConfig, want *transport_test.linkConfig: transport: bad config")
	_, err = p.Dial(ctx, "a", "tcp", transport.Deps{})
	assert.ErrorIs(t, err, transport.ErrBadConfig)
	assert.Nil(t, listened)
	assert.Nil(t, dialed)
}
