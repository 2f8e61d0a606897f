package grpc_test

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// TestNodeRecallNamespace drives the official Node.js 5.x client
// (testdata/node_recall.js) against a real `mq dev`: a Producer and a
// SimpleConsumer of namespace ns1 work on topic NodeNsT, which the broker
// holds as ns1%NodeNsT (a 4.x client of namespace ns1 reads what they
// sent); the producer recalls one of two delay messages with the handle
// its send answered, and only the other is delivered; a forged handle is
// refused.
func TestNodeRecallNamespace(t *testing.T) {
	dir := nodeClientDir(t)
	e := startNodeDev(t)
	e.createTopic(t, "ns1%NodeNsT", 1)

	var out struct {
		Recalled, Kept, Now, Handle, RecallReceipt, Forged string
		Due                                                int64
		Received                                           []struct {
			ID, Topic, Body string
			At              int64
		}
	}
	runNodeScript(t, dir, "node_recall.js", 2*time.Minute, &out, e.endpoints)

	h, err := base64.URLEncoding.DecodeString(out.Handle)
	require.NoError(t, err, "handle %q", out.Handle)
	assert.Equal(t, fmt.Sprintf("v1 ns1%%NodeNsT broker-a %d %s", out.Due+1, out.Recalled), string(h), "Java's v1 handle of the broker's topic name")
	assert.Equal(t, out.Recalled, out.RecallReceipt)
	assert.NotEqual(t, "accepted", out.Forged)
	assert.Contains(t, out.Forged, "40000", "a forged handle is BAD_REQUEST: %s", out.Forged)

	got := map[string]bool{}
	for _, r := range out.Received {
		got[r.ID] = true
		assert.Equal(t, "NodeNsT", r.Topic, "the topic is answered without the namespace")
		if r.ID == out.Kept {
			assert.GreaterOrEqual(t, r.At, out.Due, "not before its delivery time")
		}
	}
	assert.Equal(t, map[string]bool{out.Kept: true, out.Now: true}, got, "the recalled message never arrives")

	// A 4.x client of namespace ns1 reads the same topic: ns1%NodeNsT.
	pr := e.invoke(t, remoting.PullMessage, map[string]string{
		"consumerGroup": "ns1%G4", "topic": "ns1%NodeNsT", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
	}, nil)
	require.Equal(t, remoting.Success, pr.Code, pr.Remark)
	msgs, err := client.DecodeMessages(pr.Body, "broker-a")
	require.NoError(t, err)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.MsgID)
	}
	assert.ElementsMatch(t, []string{out.Now, out.Kept}, ids)
}
