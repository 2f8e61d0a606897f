package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

// TestBrokerPassThrough checks that Quiver's own push consumer answers the
// calls a broker passes through to it over its heartbeat connection:
// GET_CONSUMER_RUNNING_INFO (relayed as the client wrote it) and
// GET_CONSUMER_STATUS_FROM_CLIENT (gathered by
// INVOKE_BROKER_TO_GET_CONSUMER_STATUS).
func TestBrokerPassThrough(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic, group := uniq("Pass"), uniq("CG")
	e.createTopic(t, topic, 2)
	col := newCollector()
	e.push(t, topic, pushOpts{group: group}, col.handle)
	p := e.producer(t)
	for i := 0; i < 6; i++ {
		sendSync(t, p, msg(topic, fmt.Sprintf("m-%d", i)))
	}
	waitFor(t, 30*time.Second, func() bool { return col.count() == 6 }, "6 messages")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := e.admin(t)
	ids, err := a.ConsumerIDs(ctx, group)
	require.NoError(t, err)
	require.Len(t, ids, 1)
	raw := e.client(t)
	call := func(code int32, ext map[string]string) *remoting.Command {
		resp, err := raw.Invoke(ctx, e.srv.Broker, remoting.NewRequest(code, ext, nil))
		require.NoError(t, err)
		return resp
	}

	resp := call(remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": ids[0], "jstackEnable": "false"})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), `"subscriptionSet"`)
	assert.Contains(t, string(resp.Body), topic)

	entry := regexp.MustCompile(`\{"brokerName":"[^"]+","queueId":\d+,"topic":"` + topic + `"\}:(\d+)`)
	waitFor(t, 30*time.Second, func() bool {
		resp := call(remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": group})
		if resp.Code != remoting.Success || !regexp.MustCompile(`^\{"consumerTable":\{"`+regexp.QuoteMeta(ids[0])+`":\{`).Match(resp.Body) {
			return false
		}
		sum := 0
		for _, m := range entry.FindAllStringSubmatch(string(resp.Body), -1) {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
		return sum == 6
	}, "the consumer's offsets of %s summing to 6", topic)
}
