package transport_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/core/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformanceMemory runs the suite on a transport that carries frames
// as messages, with no byte stream underneath.
func TestConformanceMemory(t *testing.T) {
	n := newMemNet()
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		ln, err := n.listen("", transporttest.MaxFrameSize)
		require.NoError(t, err)
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return n.dial(ctx, ln.Addr(), transporttest.MaxFrameSize)
		}
	})
}

func TestSplitScheme(t *testing.T) {
	tests := []struct {
		give         string
		scheme, addr string
	}{
		{"127.0.0.1:10911", "tcp", "127.0.0.1:10911"},
		{"quic://broker-a:10911", "quic", "broker-a:10911"},
		{"nats://n1:4222", "nats", "n1:4222"},
		{"[::1]:9876", "tcp", "[::1]:9876"},
		{"tcp://[::1]:9876", "tcp", "[::1]:9876"},
		{"://x:1", "", "x:1"},
		{"", "tcp", ""},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			scheme, addr := transport.SplitScheme(tt.give)
			assert.Equal(t, tt.scheme, scheme)
			assert.Equal(t, tt.addr, addr)
		})
	}
}

func TestSet(t *testing.T) {
	n := newMemNet()
	a := &memProvider{id: "tcp", net: n}
	b := &memProvider{id: "quic", net: n}
	cfgA, cfgB := &memConfig{Name: "a"}, &memConfig{Name: "b"}
	s := transport.NewSet([]transport.Provider{a, b}, map[string]any{"tcp": cfgA, "quic": cfgB}, transport.Deps{MaxFrameSize: 1 << 10})
	assert.Equal(t, []string{"tcp", "quic"}, s.IDs())

	ctx := context.Background()
	lns, err := s.Listen(ctx, "127.0.0.1:1")
	require.NoError(t, err)
	require.Len(t, lns, 2)
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	assert.Equal(t, []any{cfgA}, a.gotCfgs, "each provider gets its own config")
	assert.Equal(t, []any{cfgB}, b.gotCfgs)

	for _, addr := range []string{"127.0.0.1:1", "tcp://127.0.0.1:1", "quic://127.0.0.1:1"} {
		scheme, _ := transport.SplitScheme(addr)
		ln := lns[0]
		if scheme == "quic" {
			ln = lns[1]
		}
		accepted := make(chan transport.Conn, 1)
		go func() {
			c, _ := ln.Accept(ctx)
			accepted <- c
		}()
		c, err := s.Dial(ctx, addr)
		require.NoError(t, err, addr)
		sc := <-accepted
		require.NotNil(t, sc, addr)
		require.NoError(t, c.WriteFrame(ctx, []byte("ping")))
		got, err := sc.ReadFrame(ctx)
		require.NoError(t, err)
		assert.Equal(t, "ping", string(got))
		assert.ErrorIs(t, c.WriteFrame(ctx, make([]byte, 1<<10+1)), transport.ErrFrameTooLarge, "Deps.MaxFrameSize reaches the provider")
		c.Close()
		sc.Close()
	}

	_, err = s.Dial(ctx, "nats://127.0.0.1:1")
	assert.EqualError(t, err, `transport: no enabled transport "nats" for nats://127.0.0.1:1 (enabled: tcp, quic)`)
}

func TestSetListenFailureClosesBound(t *testing.T) {
	n := newMemNet()
	a := &memProvider{id: "tcp", net: n}
	b := &memProvider{id: "quic", net: n, failOn: "127.0.0.1:2"}
	s := transport.NewSet([]transport.Provider{a, b}, nil, transport.Deps{})
	_, err := s.Listen(context.Background(), "127.0.0.1:2")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "transport quic: listen 127.0.0.1:2")
	// The tcp listener bound first was closed: its address is free again.
	ln, err := n.listen("tcp-127.0.0.1:2", 1)
	require.NoError(t, err)
	ln.Close()
}

func TestSetEmpty(t *testing.T) {
	s := transport.NewSet(nil, nil, transport.Deps{})
	assert.Empty(t, s.IDs())
	_, err := s.Listen(context.Background(), "127.0.0.1:0")
	assert.EqualError(t, err, "transport: no transport enabled")
	_, err = s.Dial(context.Background(), "127.0.0.1:1")
	assert.Error(t, err)
}
