package admin

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
)

func TestCheckMessageID(t *testing.T) {
	tests := []struct {
		give string
		ok   bool
	}{
		{"7F00000100002A9F0000000000000000", true},
		{"0A0B0C0D1E2F00000000a1b2c3d40001", true}, // the Go client's msgId: upper prefix, lower tail
		{"ab", true},
		{"", false},
		{"nonsense", false},
		{"7F000001 00002A9F", false},
		{"../../etc/passwd", false},
		{string(make([]byte, 65)), false},
	}
	for _, tt := range tests {
		err := checkMessageID(tt.give)
		if tt.ok {
			assert.NoError(t, err, tt.give)
		} else {
			assert.ErrorIs(t, err, ErrBadMessageID, tt.give)
		}
	}
}

func TestOffsetMsgIDRoundTrip(t *testing.T) {
	broker := netip.MustParseAddrPort("127.0.0.1:10911")
	id := message.OffsetMsgID(broker, 4096)
	tests := []struct {
		name     string
		give     string
		wantHost string
		wantOff  int64
		ok       bool
	}{
		{"offsetMsgId", id, "127.0.0.1:10911", 4096, true},
		{"lower case", "7f00000100002a9f0000000000001000", "127.0.0.1:10911", 4096, true},
		{"IPv6", message.OffsetMsgID(netip.MustParseAddrPort("[::1]:10911"), 7), "[::1]:10911", 7, true},
		// A Go client msgId: IP, pid 0x1234 and class loader id 0 make a
		// "port" of 0x12340000, which a 16-bit port cannot hold.
		{"msgId with a pid as port", "7F000001123400000000a1b2c3d40001", "", 0, false},
		{"wrong length", "7F00000100002A9F", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, off, ok := offsetMsgID(tt.give)
			require.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.wantHost, host.String())
				assert.Equal(t, tt.wantOff, off)
			}
		})
	}
}

func TestBrokersOf(t *testing.T) {
	ci := &ClusterInfo{Brokers: map[string]map[int64]string{
		"broker-b": {1: "127.0.0.1:20911", 2: "127.0.0.1:30911"}, // no master now
		"broker-a": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"},
		"broker-c": {0: ""},
	}}
	r := brokersOf(ci)
	assert.Equal(t, []string{"broker-a", "broker-b"}, r.names)
	assert.Equal(t, map[string]string{"broker-a": "127.0.0.1:10911", "broker-b": "127.0.0.1:20911"}, r.addrOf)
	assert.Len(t, r.byAddr, 4)
	assert.Equal(t, brokerAddr{name: "broker-a", addr: "127.0.0.1:10921"}, r.byAddr["127.0.0.1:10921"])
	_, ok := r.byAddr["127.0.0.1:1"]
	assert.False(t, ok)
}

func TestForEach(t *testing.T) {
	t.Run("every index once", func(t *testing.T) {
		var mu sync.Mutex
		seen := map[int]int{}
		require.NoError(t, forEach(context.Background(), 100, 8, func(_ context.Context, i int) error {
			mu.Lock()
			seen[i]++
			mu.Unlock()
			return nil
		}))
		require.Len(t, seen, 100)
		for i, n := range seen {
			assert.Equal(t, 1, n, "index %d", i)
		}
	})
	t.Run("first error stops the rest", func(t *testing.T) {
		boom := errors.New("boom")
		var started atomic.Int32
		err := forEach(context.Background(), 1000, 2, func(ctx context.Context, i int) error {
			started.Add(1)
			if i == 3 {
				return boom
			}
			return nil
		})
		assert.ErrorIs(t, err, boom)
		assert.Less(t, started.Load(), int32(1000))
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := forEach(ctx, 10, 2, func(ctx context.Context, i int) error { return ctx.Err() })
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("nothing to do", func(t *testing.T) {
		assert.NoError(t, forEach(context.Background(), 0, 8, func(context.Context, int) error { return errors.New("called") }))
	})
}
