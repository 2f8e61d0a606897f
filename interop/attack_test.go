package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// The attacker holds valid accounts: one with no permission at all, one
// admin (an ordinary account too: cluster traffic needs role: broker).
// victim01 is the legitimate application.
const attackACL = `accounts:
  - accessKey: noperm01
    secretKey: nopermSecret01
  - accessKey: admin001
    secretKey: adminSecret01
    admin: true
  - accessKey: broker01
    secretKey: brokerSecret01
    role: broker
  - accessKey: victim01
    secretKey: victimSecret01
    topicPerms: [Orders=PUB|SUB, Secrets=PUB|SUB]
    groupPerms: [VictimG=SUB, VictimPG=PUB]
  - accessKey: reader01
    secretKey: readerSecret01
    topicPerms: [Mine=SUB, Orders=SUB]
    groupPerms: [AttackG=SUB]
`

var attackers = []struct{ name, ak, sk string }{
	{"no-permission account", "noperm01", "nopermSecret01"},
	{"admin account", "admin001", "adminSecret01"},
}

func signedAs(req *remoting.Command, ak, sk string) *remoting.Command {
	acl.Sign(req.ExtFields, req.Body, ak, sk, "")
	return req
}

// signedRoute reads topic's route as ak.
func signedRoute(t *testing.T, c *remoting.Client, ns, topic string) *protocol.TopicRouteData {
	t.Helper()
	resp, err := invoke(c, ns, signedAs(remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil), "victim01", "victimSecret01"))
	require.NoError(t, err)
	if resp.Code != remoting.Success {
		return nil
	}
	var r protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &r), string(resp.Body))
	return &r
}

func victimProducer(t *testing.T, ns string) rocketmq.Producer {
	return newProducer(t, ns, producer.WithRetry(0), producer.WithGroupName("VictimPG"),
		producer.WithCredentials(primitive.Credentials{AccessKey: "victim01", SecretKey: "victimSecret01"}))
}

// TestAttackRoutingHijack: an account registers a fake broker for a topic
// (its listener would get the producer's messages) and unregisters the
// real one. Both are refused, admin included; the official producer's
// messages all reach the real broker.
func TestAttackRoutingHijack(t *testing.T) {
	s := startAuthz(t, attackACL)
	c := rawClient(t)
	createTopic(t, c, s.Broker, "Orders")
	require.Eventually(t, func() bool { return signedRoute(t, c, s.Namesrv, "Orders") != nil }, 15*time.Second, 20*time.Millisecond)

	evil, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer evil.Close()
	var evilConns atomic.Int32
	go func() {
		for {
			conn, err := evil.Accept()
			if err != nil {
				return
			}
			evilConns.Add(1)
			conn.Close()
		}
	}()
	body, err := json.Marshal(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigWrapper{
		DataVersion: protocol.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1},
		TopicConfigTable: map[string]*protocol.TopicConfig{"Orders": {
			TopicName: "Orders", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicFilterType: "SINGLE_TAG",
		}},
	}, FilterServerList: []string{}})
	require.NoError(t, err)
	for _, a := range attackers {
		t.Run(a.name, func(t *testing.T) {
			reg := remoting.NewRequest(remoting.RegisterBroker, map[string]string{
				"brokerName": "evil-broker", "brokerAddr": evil.Addr().String(), "clusterName": "DefaultCluster",
				"haServerAddr": evil.Addr().String(), "brokerId": "0", "compressed": "false", "bodyCrc32": "0",
			}, body)
			resp, err := invoke(c, s.Namesrv, signedAs(reg, a.ak, a.sk))
			require.NoError(t, err)
			assert.True(t, aclRefused(resp), "REGISTER_BROKER answered %d %q", resp.Code, resp.Remark)
			assert.Contains(t, resp.Remark, "role: broker")

			unreg := remoting.NewRequest(remoting.UnregisterBroker, map[string]string{
				"brokerName": s.b.Config().Name, "brokerAddr": s.Broker, "clusterName": s.b.Config().Cluster, "brokerId": "0",
			}, nil)
			resp, err = invoke(c, s.Namesrv, signedAs(unreg, a.ak, a.sk))
			require.NoError(t, err)
			assert.True(t, aclRefused(resp), "UNREGISTER_BROKER answered %d %q", resp.Code, resp.Remark)
		})
	}

	route := signedRoute(t, c, s.Namesrv, "Orders")
	require.NotNil(t, route)
	require.Len(t, route.BrokerDatas, 1, "the route holds only the real broker")
	assert.Equal(t, s.b.Config().Name, route.BrokerDatas[0].BrokerName)

	p := victimProducer(t, s.Namesrv)
	for i := 0; i < 16; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := p.SendSync(ctx, primitive.NewMessage("Orders", []byte(fmt.Sprintf("order-%d", i))))
		cancel()
		require.NoError(t, err)
		assert.Equal(t, primitive.SendOK, res.Status)
		assert.Equal(t, s.b.Config().Name, res.MessageQueue.BrokerName)
	}
	assert.Zero(t, evilConns.Load(), "the attacker's listener was dialled")
}

// TestAttackFakeSlave: posing as a slave, an account pulls the whole
// commit log from a SYNC_MASTER and would make it acknowledge sends no
// replica holds. HA_PULL is refused, admin included; the producer's sends
// are truthfully answered SLAVE_NOT_AVAILABLE. A cluster member's pull
// (role: broker) is served, so the refusal is the ACL's.
func TestAttackFakeSlave(t *testing.T) {
	s := startAuthz(t, attackACL, "broker.role=SYNC_MASTER")
	c := rawClient(t)
	createTopic(t, c, s.Broker, "Secrets")
	sendRaw(t, c, s.Broker, "Secrets", "victim01", "victimSecret01")

	pull := func(ak, sk string) *remoting.Command {
		req := remoting.NewRequest(remoting.HAPull, map[string]string{
			"offset": "0", "brokerId": "1", "maxBytes": "1048576", "slaveAddr": "127.0.0.1:1",
		}, nil)
		resp, err := invoke(c, s.Broker, signedAs(req, ak, sk))
		require.NoError(t, err)
		return resp
	}
	for _, a := range attackers {
		t.Run(a.name, func(t *testing.T) {
			resp := pull(a.ak, a.sk)
			assert.True(t, aclRefused(resp), "HA_PULL answered %d %q", resp.Code, resp.Remark)
			assert.Empty(t, resp.Body, "commit-log bytes leaked")
		})
	}

	p := victimProducer(t, s.Namesrv)
	require.Eventually(t, func() bool { return signedRoute(t, c, s.Namesrv, "Secrets") != nil }, 15*time.Second, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	res, err := p.SendSync(ctx, primitive.NewMessage("Secrets", []byte("needs a replica")))
	cancel()
	require.NoError(t, err)
	assert.Equal(t, primitive.SendSlaveNotAvailable, res.Status, "no real replica holds the message")

	// The same pull by a cluster member is served: the whole log.
	resp := pull("broker01", "brokerSecret01")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), "needs a replica")
}

// TestAttackReadOtherTopic: VIEW_MESSAGE_BY_ID returns a message by its
// commit-log offset, whatever its topic. An account may read only
// messages of topics it may consume; QUERY_MESSAGE likewise.
func TestAttackReadOtherTopic(t *testing.T) {
	s := startAuthz(t, attackACL)
	c := rawClient(t)
	createTopic(t, c, s.Broker, "Secrets")
	createTopic(t, c, s.Broker, "Mine")
	secret := sendRaw(t, c, s.Broker, "Secrets", "victim01", "victimSecret01")
	mine := sendRaw(t, c, s.Broker, "Mine", "admin001", "adminSecret01")

	view := func(off int64) *remoting.Command {
		req := remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": fmt.Sprint(off)}, nil)
		resp, err := invoke(c, s.Broker, signedAs(req, "reader01", "readerSecret01"))
		require.NoError(t, err)
		return resp
	}
	resp := view(secret)
	assert.True(t, aclRefused(resp), "VIEW_MESSAGE_BY_ID answered %d %q", resp.Code, resp.Remark)
	assert.Contains(t, resp.Remark, "SUB on topic Secrets")
	assert.NotContains(t, string(resp.Body), "secret body")

	resp = view(mine)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), "secret body of Mine")

	q := remoting.NewRequest(remoting.QueryMessage, map[string]string{"topic": "Secrets", "key": "k", "maxNum": "32",
		"beginTimestamp": "0", "endTimestamp": fmt.Sprint(time.Now().Add(time.Hour).UnixMilli())}, nil)
	resp, err := invoke(c, s.Broker, signedAs(q, "reader01", "readerSecret01"))
	require.NoError(t, err)
	assert.True(t, aclRefused(resp), "QUERY_MESSAGE answered %d %q", resp.Code, resp.Remark)

	// The victim's own reads still work.
	req := remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": fmt.Sprint(secret)}, nil)
	resp, err = invoke(c, s.Broker, signedAs(req, "victim01", "victimSecret01"))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), "secret body of Secrets")
}

// TestAttackStealQueueLock: an account that may read the topic but not
// consume as the victim's group takes the orderly locks of the victim's
// queues. Refused (also when the body spells consumerGroup twice); the
// victim's orderly consumer keeps consuming.
func TestAttackStealQueueLock(t *testing.T) {
	s := startAuthz(t, attackACL)
	c := rawClient(t)
	createTopic(t, c, s.Broker, "Orders")
	require.Eventually(t, func() bool { return signedRoute(t, c, s.Namesrv, "Orders") != nil }, 15*time.Second, 20*time.Millisecond)

	p := victimProducer(t, s.Namesrv)
	send := func(body string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := p.SendSync(ctx, primitive.NewMessage("Orders", []byte(body)))
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, res.Status)
	}
	send("before")
	col := newCollector()
	newPushConsumer(t, s.Namesrv, "Orders", consumerOpts{group: "VictimG", skipRouteWait: true, extra: []consumer.Option{
		consumer.WithConsumerOrder(true),
		consumer.WithCredentials(primitive.Credentials{AccessKey: "victim01", SecretKey: "victimSecret01"}),
	}}, col.handle)
	col.waitFor(t, 1, 30*time.Second)

	var mqs []map[string]any
	for q := 0; q < 4; q++ {
		mqs = append(mqs, map[string]any{"topic": "Orders", "brokerName": s.b.Config().Name, "queueId": q})
	}
	lock := func(body string) *remoting.Command {
		req := remoting.NewRequest(remoting.LockBatchMQ, map[string]string{}, []byte(body))
		resp, err := invoke(c, s.Broker, signedAs(req, "reader01", "readerSecret01"))
		require.NoError(t, err)
		return resp
	}
	set, _ := json.Marshal(mqs)
	for name, body := range map[string]string{
		"victim's group": `{"consumerGroup":"VictimG","clientId":"thief@1","mqSet":` + string(set) + `}`,
		"two spellings":  `{"consumerGroup":"AttackG","ConsumerGroup":"VictimG","clientId":"thief@1","mqSet":` + string(set) + `}`,
	} {
		resp := lock(body)
		assert.True(t, aclRefused(resp), "%s: LOCK_BATCH_MQ answered %d %q", name, resp.Code, resp.Remark)
		unlock := remoting.NewRequest(remoting.UnlockBatchMQ, map[string]string{}, []byte(body))
		resp, err := invoke(c, s.Broker, signedAs(unlock, "reader01", "readerSecret01"))
		require.NoError(t, err)
		assert.True(t, aclRefused(resp), "%s: UNLOCK_BATCH_MQ answered %d %q", name, resp.Code, resp.Remark)
	}
	// Its own group's locks it may take.
	resp := lock(`{"consumerGroup":"AttackG","clientId":"thief@1","mqSet":` + string(set) + `}`)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.True(t, strings.Contains(string(resp.Body), "Orders"), string(resp.Body))

	for i := 0; i < 8; i++ {
		send(fmt.Sprintf("after-%d", i))
	}
	col.waitFor(t, 9, 30*time.Second)
}

// TestAttackJoinProducerGroup: a member of a producer group receives its
// transaction check-backs, half messages included. As in RocketMQ 4.9 a
// heartbeat is not refused for its producer groups (its consumers must
// register), but one naming another account's producer group does not
// make the sender a member: the ACL leaves the group out of the body the
// broker processes. The owner joins.
func TestAttackJoinProducerGroup(t *testing.T) {
	s := startAuthz(t, attackACL)
	c := rawClient(t)
	hb := func(id, ak, sk string) *remoting.Command {
		body := []byte(`{"clientID":"` + id + `","producerDataSet":[{"groupName":"VictimPG"}],"consumerDataSet":[]}`)
		resp, err := invoke(c, s.Broker, signedAs(remoting.NewRequest(remoting.HeartBeat, map[string]string{}, body), ak, sk))
		require.NoError(t, err)
		return resp
	}
	members := func() string {
		req := remoting.NewRequest(remoting.GetProducerConnectionList, map[string]string{"producerGroup": "VictimPG"}, nil)
		resp, err := invoke(c, s.Broker, signedAs(req, "admin001", "adminSecret01"))
		require.NoError(t, err)
		return resp.Remark + string(resp.Body)
	}
	resp := hb("127.0.0.1@thief", "reader01", "readerSecret01")
	assert.Equal(t, remoting.Success, resp.Code, "4.9 does not check a heartbeat's producer groups: %q", resp.Remark)
	assert.NotContains(t, members(), "thief", "the thief joined VictimPG")
	resp = hb("127.0.0.1@owner", "victim01", "victimSecret01")
	assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, members(), "127.0.0.1@owner")
	assert.NotContains(t, members(), "thief", "the thief joined VictimPG")
}
