package namesrv

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// TestRegisterMaskedCRC: a Java broker sends bodyCrc32 = UtilAll.crc32(body),
// the CRC-32 with its top bit cleared; the name server accepts it, and the
// full CRC-32 older Quiver brokers sent (as a signed or unsigned number),
// and refuses anything else. The body is chosen so that its CRC has the
// top bit set, where the two differ.
func TestRegisterMaskedCRC(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	var body []byte
	var sum uint32
	for i := 0; ; i++ {
		b := brokerA
		b.topics = []*protocol.TopicConfig{topic(fmt.Sprintf("CrcTopic%d", i), 4, 6)}
		var err error
		body, err = json.Marshal(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: b.wrapper(), FilterServerList: []string{}})
		require.NoError(t, err)
		if sum = crc32.ChecksumIEEE(body); sum>>31 == 1 {
			break
		}
	}
	masked := sum & 0x7FFFFFFF
	require.NotEqual(t, sum, masked)
	tests := []struct {
		name     string
		give     string
		wantCode int32
	}{
		{"java UtilAll.crc32 (masked)", strconv.FormatUint(uint64(masked), 10), remoting.Success},
		{"old quiver: full crc as java signed int", strconv.FormatInt(int64(int32(sum)), 10), remoting.Success},
		{"old quiver: full crc unsigned", strconv.FormatUint(uint64(sum), 10), remoting.Success},
		{"masked, off by one bit", strconv.FormatUint(uint64(masked^1), 10), remoting.SystemError},
		{"masked, negated", strconv.FormatInt(-int64(masked), 10), remoting.SystemError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := brokerA.header()
			h["bodyCrc32"] = tt.give
			resp := invoke(t, c, addr, remoting.NewRequest(remoting.RegisterBroker, h, body))
			assert.Equal(t, tt.wantCode, resp.Code, resp.Remark)
			if tt.wantCode == remoting.SystemError {
				assert.Equal(t, "crc32 not match", resp.Remark)
			}
		})
	}
}
