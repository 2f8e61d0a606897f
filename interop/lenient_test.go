package interop

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/internal/testserver"
)

// rawConn speaks RemotingCommand over a plain TCP socket with headers
// written by hand, not by our encoder: what a client whose JSON library
// writes numbers and booleans as such (fastjson with a Map<String,Object>,
// other languages' clients) sends a Java broker.
type rawConn struct {
	t      *testing.T
	c      net.Conn
	opaque int
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, opaque: 100}
}

// call sends a request with code and extFields given as raw JSON object
// text, and reads frames until the answer with its opaque arrives.
func (r *rawConn) call(code int32, ext string, body []byte) *remoting.Command {
	r.t.Helper()
	r.opaque++
	hdr := fmt.Sprintf(`{"code":%d,"extFields":%s,"flag":0,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":409}`, code, ext, r.opaque)
	return r.send(hdr, body, int32(r.opaque))
}

// send writes one frame with header hdr and reads the answer to opaque.
func (r *rawConn) send(hdr string, body []byte, opaque int32) *remoting.Command {
	r.t.Helper()
	f := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)+len(body)))
	f = binary.BigEndian.AppendUint32(f, uint32(len(hdr)))
	f = append(append(f, hdr...), body...)
	require.NoError(r.t, r.c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := r.c.Write(f)
	require.NoError(r.t, err)
	for {
		var n [4]byte
		_, err := io.ReadFull(r.c, n[:])
		require.NoError(r.t, err, "reading the answer to %s", hdr)
		frame := make([]byte, binary.BigEndian.Uint32(n[:]))
		_, err = io.ReadFull(r.c, frame)
		require.NoError(r.t, err)
		resp, err := codec.Decode(frame)
		require.NoError(r.t, err)
		if resp.IsResponse() && resp.Opaque == opaque {
			return resp
		}
	}
}

// TestLenientHeadersAgainstBroker: a real broker serves sends, pulls and
// offset requests whose extFields carry JSON numbers and booleans (as Java
// 4.9's fastjson accepts them), answers a wrong-shaped header with an error
// on a connection that keeps working, and stores BODYCRC as Java's
// UtilAll.crc32.
func TestLenientHeadersAgainstBroker(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("Lenient")
	group := uniq("LenientGroup")
	rc := dialRaw(t, srv.Broker)

	// SEND_MESSAGE_V2 with numbers and booleans where Java's client writes
	// strings: d (defaultTopicQueueNums), e (queueId), f (sysFlag), g
	// (bornTimestamp), h (flag), j (reconsumeTimes), l
	// (maxReconsumeTimes) numbers; k (unitMode) and m (batch) booleans.
	bodies := []string{"quiver", "123456789"} // CRCs with the top bit set
	born := time.Now().UnixMilli()
	var sent []int64
	for _, b := range bodies {
		resp := rc.call(remoting.SendMessageV2, fmt.Sprintf(
			`{"a":"PG","b":%q,"c":"TBW102","d":4,"e":0,"f":0,"g":%d,"h":0,"i":"TAGS\u0001t\u0002","j":0,"k":false,"l":16,"m":false}`,
			topic, born), []byte(b))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		assert.Equal(t, "0", resp.Ext("queueId"))
		off, err := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
		require.NoError(t, err)
		sent = append(sent, off)
	}
	assert.Equal(t, []int64{0, 1}, sent)

	// A wrong-shaped header: an error answer with its opaque, and the
	// connection serves the next request.
	bad := rc.send(`{"code":11,"extFields":["consumerGroup",1],"flag":0,"language":"JAVA","opaque":7777,"version":409}`, nil, 7777)
	assert.Equal(t, remoting.SystemError, bad.Code)
	assert.Contains(t, bad.Remark, "extFields")
	bad = rc.send(`{"code":{"n":11},"extFields":{},"opaque":7778}`, nil, 7778)
	assert.Equal(t, remoting.SystemError, bad.Code)
	assert.Contains(t, bad.Remark, "code")

	// PULL_MESSAGE with numeric queueId, queueOffset, maxMsgNums, sysFlag
	// (4: the subscription is in the request), commitOffset, subVersion
	// and suspendTimeoutMillis.
	resp := rc.call(remoting.PullMessage, fmt.Sprintf(
		`{"consumerGroup":%q,"topic":%q,"queueId":0,"queueOffset":0,"maxMsgNums":32,"sysFlag":4,"commitOffset":0,"suspendTimeoutMillis":0,"subscription":"*","subVersion":0,"expressionType":"TAG"}`,
		group, topic), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	msgs, err := message.DecodeAll(resp.Body)
	require.NoError(t, err)
	require.Len(t, msgs, len(bodies))
	for i, m := range msgs {
		assert.Equal(t, bodies[i], string(m.Body))
		assert.Equal(t, born, m.BornTimestamp)
		// BODYCRC as Java's UtilAll.crc32 (what a Java consumer checks):
		// zlib.crc32(b"quiver") & 0x7fffffff = 1885156321 and
		// zlib.crc32(b"123456789") & 0x7fffffff = 1274296614 (python3).
		assert.Equal(t, []uint32{1885156321, 1274296614}[i], m.BodyCRC, "BODYCRC of %q", m.Body)
		assert.NotEqual(t, crc32.ChecksumIEEE(m.Body), m.BodyCRC)
	}

	// Offsets with numeric fields.
	resp = rc.call(remoting.UpdateConsumerOffset, fmt.Sprintf(`{"consumerGroup":%q,"topic":%q,"queueId":0,"commitOffset":1}`, group, topic), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = rc.call(remoting.QueryConsumerOffset, fmt.Sprintf(`{"consumerGroup":%q,"topic":%q,"queueId":0,"setZeroIfNotFound":true}`, group, topic), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "1", resp.Ext("offset"))
	resp = rc.call(remoting.GetMaxOffset, fmt.Sprintf(`{"topic":%q,"queueId":0,"committed":true}`, topic), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "2", resp.Ext("offset"))
	resp = rc.call(remoting.SearchOffsetByTimestamp, fmt.Sprintf(`{"topic":%q,"queueId":0,"timestamp":%d}`, topic, born-60_000), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "0", resp.Ext("offset"))

	// CONSUMER_SEND_MSG_BACK with numeric offset, delayLevel and
	// maxReconsumeTimes and a boolean unitMode.
	resp = rc.call(remoting.ConsumerSendMsgBack, fmt.Sprintf(
		`{"offset":%d,"group":%q,"delayLevel":0,"originTopic":%q,"unitMode":false,"maxReconsumeTimes":16}`,
		msgs[0].CommitLogOffset, group, topic), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}
