package broker

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
)

func TestRecordQueue(t *testing.T) {
	tests := []struct {
		name string
		host string
	}{
		{"v4", "10.0.0.1:10911"},
		{"v6", "[::1]:10911"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &message.Ext{
				Message: message.Message{Topic: "TopicX", Body: []byte("body"), Properties: message.Properties{"TAGS": "a"}},
				QueueID: 3, BornHost: netip.MustParseAddrPort(tt.host), StoreHost: netip.MustParseAddrPort(tt.host),
			}
			rec, err := message.EncodeStored(m)
			require.NoError(t, err)
			message.PatchStored(rec, 42, 1000, 1)
			topic, q, off, ok := recordQueue(rec)
			require.True(t, ok)
			assert.Equal(t, "TopicX", topic)
			assert.Equal(t, int32(3), q)
			assert.Equal(t, int64(42), off)
			_, _, _, ok = recordQueue(rec[:60])
			assert.False(t, ok)
		})
	}
}
