package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/core/remoting"
)

// forgeHandle is handle with its message id replaced (same topic, broker
// and time: only the broker's lookup can tell).
func forgeHandle(t *testing.T, handle, id string) string {
	t.Helper()
	raw, err := base64.URLEncoding.DecodeString(handle)
	require.NoError(t, err)
	f := strings.Split(string(raw), " ")
	require.Len(t, f, 5)
	f[4] = id
	return base64.URLEncoding.EncodeToString([]byte(strings.Join(f, " ")))
}

// TestProducerRecall: against a real mq dev, a timer message's send
// answer carries its recall handle, Producer.Recall (RECALL_MESSAGE)
// returns its message id and it is never consumed, while the timer sent
// beside it is; a second recall succeeds; a made-up handle and another
// topic's handle are refused with the broker's ILLEGAL_OPERATION, a
// garbled one before anything is sent.
func TestProducerRecall(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic, other := uniq("Recall"), uniq("RecallOther")
	e.createTopic(t, topic, 2)
	e.createTopic(t, other, 1)
	p := e.producer(t)
	due := time.Now().Add(3 * time.Second)
	recalled := sendSync(t, p, msg(topic, "recalled").SetDeliverTime(due))
	kept := sendSync(t, p, msg(topic, "kept").SetDeliverTime(due))
	plain := sendSync(t, p, msg(topic, "plain"))
	require.NotEmpty(t, recalled.RecallHandle, "a held timer message has a handle")
	require.NotEmpty(t, kept.RecallHandle)
	assert.Empty(t, plain.RecallHandle, "a message delivered at once has none")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := p.Recall(ctx, topic, recalled.RecallHandle)
	require.NoError(t, err)
	assert.Equal(t, recalled.MsgID, id, "the recalled message's UNIQ_KEY, as Java's recallMessage returns")
	id, err = p.Recall(ctx, topic, recalled.RecallHandle)
	require.NoError(t, err, "recalling again succeeds, as on RocketMQ")
	assert.Equal(t, recalled.MsgID, id)

	_, err = p.Recall(ctx, topic, forgeHandle(t, kept.RecallHandle, "ID-NONE"))
	require.Error(t, err)
	assert.Equal(t, remoting.IllegalOperation, client.CodeOf(err), err.Error())
	assert.Contains(t, err.Error(), "no such scheduled message")
	_, err = p.Recall(ctx, other, kept.RecallHandle)
	require.Error(t, err)
	assert.Equal(t, remoting.IllegalOperation, client.CodeOf(err), err.Error())
	assert.Contains(t, err.Error(), "recall failed, topic not match")
	_, err = p.Recall(ctx, topic, "")
	assert.ErrorIs(t, err, client.ErrBadRecallHandle)
	_, err = p.Recall(ctx, topic, "not+base64/url")
	assert.ErrorIs(t, err, client.ErrBadRecallHandle)

	c := newCollector()
	e.push(t, topic, pushOpts{group: uniq("RecallCG")}, c.handle)
	c.wait(t, 2, 20*time.Second)
	time.Sleep(time.Until(due.Add(time.Second)))
	assert.Equal(t, []string{"kept", "plain"}, c.bodies(), "the recalled message is never delivered")
	_, err = p.Recall(ctx, topic, kept.RecallHandle)
	assert.Equal(t, remoting.IllegalOperation, client.CodeOf(err), "delivered: too late (%v)", err)
}

const recallACLFile = `accounts:
  - accessKey: pubKey001
    secretKey: pubSecret001
    defaultTopicPerm: PUB
    defaultGroupPerm: SUB
  - accessKey: subKey001
    secretKey: subSecret001
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
`

// TestProducerRecallACL: with ACL on, RECALL_MESSAGE needs PUB on the
// topic (RocketMQ 5.3's @RocketMQAction rule): an account with SUB only
// is refused NO_PERMISSION by the ACL and the message it tried to recall
// is delivered at its time; the account that sent the other one recalls
// it, and it is never delivered.
func TestProducerRecallACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(recallACLFile), 0o600))
	e := startEnv(t, tcpScheme, "auth.acl.enabled=true", "auth.acl.file="+file)
	topic := uniq("RecallACL")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newProducer := func(ak, sk string) *producer.Producer {
		p, err := producer.New(e.client(t, client.WithCredentials(ak, sk, "")), uniq("PG"))
		require.NoError(t, err)
		t.Cleanup(func() { p.Shutdown(context.Background()) })
		return p
	}
	sendSync(t, newProducer("adminKey01", "adminSecret01"), msg(topic, "create")) // auto-creates the topic
	pub, sub := newProducer("pubKey001", "pubSecret001"), newProducer("subKey001", "subSecret001")

	due := time.Now().Add(3 * time.Second)
	tried := sendSync(t, pub, msg(topic, "tried").SetDeliverTime(due))
	recalled := sendSync(t, pub, msg(topic, "recalled").SetDeliverTime(due))
	require.NotEmpty(t, tried.RecallHandle)
	_, err := sub.Recall(ctx, topic, tried.RecallHandle)
	require.Error(t, err)
	assert.Equal(t, remoting.NoPermission, client.CodeOf(err), err.Error())
	assert.Contains(t, err.Error(), "acl: ")
	id, err := pub.Recall(ctx, topic, recalled.RecallHandle)
	require.NoError(t, err)
	assert.Equal(t, recalled.MsgID, id)

	c := newCollector()
	e.push(t, topic, pushOpts{group: uniq("RecallCG"), copts: []client.Option{client.WithCredentials("subKey001", "subSecret001", "")}}, c.handle)
	c.wait(t, 2, 20*time.Second) // create, tried
	time.Sleep(time.Until(due.Add(time.Second)))
	assert.Equal(t, []string{"create", "tried"}, c.bodies(), "the refused recall left its message alone; the recalled one never comes")
}
