package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// adminCall sends one admin request to the broker, as mqadmin does.
func adminCall(t *testing.T, srv *testserver.Proc, code int32, ext map[string]string) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := rawClient(t).Invoke(ctx, srv.Broker, remoting.NewRequest(code, ext, nil))
	require.NoError(t, err)
	return resp
}

// pollFor retries check until it passes or the timeout ends.
func pollFor(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// TestAdminCodesWithOfficialClients checks the admin codes that involve
// clients against the official Go producer and push consumer: the broker
// lists the producer's connection from its heartbeats, passes
// GET_CONSUMER_RUNNING_INFO through to the consumer over the connection it
// heartbeats on and relays its answer, and gathers the consumer's offsets
// with GET_CONSUMER_STATUS_FROM_CLIENT (INVOKE_BROKER_TO_GET_CONSUMER_STATUS).
func TestAdminCodesWithOfficialClients(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic, group, pg := uniq("AdminCodes"), uniq("AdminCG"), uniq("AdminPG")
	p := newProducer(t, srv.Namesrv, producer.WithGroupName(pg))
	for i := 0; i < 4; i++ {
		sendSync(t, p, newMsg(topic, fmt.Sprintf("m%d", i)))
	}
	col := newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group}, col.handle)
	col.waitFor(t, 4, 60*time.Second)

	var clientID string
	pollFor(t, 30*time.Second, "consumer registered", func() error {
		ids := srvConsumerIDs(t, srv, group)
		if len(ids) != 1 {
			return fmt.Errorf("consumer ids %v", ids)
		}
		clientID = ids[0]
		return nil
	})

	pollFor(t, 30*time.Second, "producer connection listed", func() error {
		resp := adminCall(t, srv, remoting.GetProducerConnectionList, map[string]string{"producerGroup": pg})
		if resp.Code != remoting.Success {
			return fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		var pc struct {
			ConnectionSet []struct {
				ClientID, ClientAddr, Language string
				Version                        int
			} `json:"connectionSet"`
		}
		if err := json.Unmarshal(resp.Body, &pc); err != nil {
			return err
		}
		if len(pc.ConnectionSet) != 1 || pc.ConnectionSet[0].Language != "GO" || pc.ConnectionSet[0].Version <= 0 || pc.ConnectionSet[0].ClientID == "" {
			return fmt.Errorf("connections %s", resp.Body)
		}
		return nil
	})

	resp := adminCall(t, srv, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": clientID, "jstackEnable": "false"})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	body := string(resp.Body)
	assert.Contains(t, body, `"PROP_CLIENT_VERSION"`, "the consumer's own answer")
	assert.Contains(t, body, `"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"`)
	assert.Contains(t, body, topic)

	resp = adminCall(t, srv, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": "127.0.0.1@nobody"})
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "not online")

	// The consumer's local offsets of the topic, which reach 4 once it has
	// consumed everything.
	entry := regexp.MustCompile(`\{"brokerName":"[^"]+","queueId":\d+,"topic":"` + topic + `"\}:(\d+)`)
	pollFor(t, 30*time.Second, "consumer status", func() error {
		resp := adminCall(t, srv, remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": group})
		if resp.Code != remoting.Success {
			return fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		prefix := `{"consumerTable":{"` + clientID + `":{`
		if len(resp.Body) < len(prefix) || string(resp.Body[:len(prefix)]) != prefix {
			return fmt.Errorf("body %s", resp.Body)
		}
		sum := 0
		for _, m := range entry.FindAllStringSubmatch(string(resp.Body), -1) {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
		if sum != 4 {
			return fmt.Errorf("offsets sum to %d in %s", sum, resp.Body)
		}
		return nil
	})
}
