package broker

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// rawJavaRequest sends one request frame with a JSON header written as
// Java's RemotingCommand writes it, and reads the answer.
func rawJavaRequest(t *testing.T, addr, header string) *remoting.Command {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	frame := make([]byte, 8, 8+len(header))
	binary.BigEndian.PutUint32(frame, uint32(4+len(header)))
	binary.BigEndian.PutUint32(frame[4:], uint32(len(header))) // serialize type 0: JSON
	frame = append(frame, header...)
	_, err = c.Write(frame)
	require.NoError(t, err)
	var n [4]byte
	_, err = io.ReadFull(c, n[:])
	require.NoError(t, err)
	resp := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err = io.ReadFull(c, resp)
	require.NoError(t, err)
	cmd, err := codec.Decode(resp)
	require.NoError(t, err)
	return cmd
}

// TestGetTopicConfig: GET_TOPIC_CONFIG (351) in frames as Java's
// MQClientAPIImpl.getTopicConfig sends them, answered as RocketMQ 5's
// AdminBrokerProcessor.getTopicConfig answers: the body is
// TopicConfigAndQueueMapping as fastjson writes it (field names in name
// order, "attributes":{} for none, no mappingDetail without static
// topics); an unknown topic is TOPIC_NOT_EXIST with Java's remark; a
// header without topic SYSTEM_ERROR with the CFNotNull remark.
func TestGetTopicConfig(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	resp := h.invoke(remoting.UpdateAndCreateTopic, map[string]string{"topic": "TC", "readQueueNums": "4", "writeQueueNums": "2", "perm": "6"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = h.invoke(remoting.UpdateAndCreateTopic, createTopicExt("Typed", "+message.type=FIFO"), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// Java 5's client: RpcRequestHeader fields beside the topic, lo=true.
	resp = rawJavaRequest(t, h.addr, `{"code":351,"extFields":{"topic":"TC","lo":"true","bname":"broker-a"},"flag":0,"language":"JAVA","opaque":11,"serializeTypeCurrentRPC":"JSON","version":475}`)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, int32(11), resp.Opaque)
	assert.Equal(t, `{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TC","topicSysFlag":0,"writeQueueNums":2}`,
		string(resp.Body), "fastjson's TopicConfigAndQueueMapping")

	resp = h.invoke(remoting.GetTopicConfig, map[string]string{"topic": "Typed"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var typed map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(resp.Body, &typed))
	assert.JSONEq(t, `{"message.type":"FIFO"}`, string(typed["attributes"]))
	assert.NotContains(t, typed, "mappingDetail")

	resp = rawJavaRequest(t, h.addr, `{"code":351,"extFields":{"topic":"Nope"},"flag":0,"language":"JAVA","opaque":12,"serializeTypeCurrentRPC":"JSON","version":475}`)
	assert.Equal(t, remoting.TopicNotExist, resp.Code)
	assert.Equal(t, "No topic in this broker. topic: Nope", resp.Remark)
	assert.Empty(t, resp.Body)

	resp = rawJavaRequest(t, h.addr, `{"code":351,"extFields":{"lo":"false"},"flag":0,"language":"JAVA","opaque":13,"serializeTypeCurrentRPC":"JSON","version":475}`)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "the custom field <topic> is null", resp.Remark)
}
