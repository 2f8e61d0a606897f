package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// TestOfficialGoClientACL2: the official Go 4.x client authenticates
// against ACL 2.0 users (AccessKey = username, SecretKey = password, the
// 4.x signature unchanged) on mq dev: a user granted Pub and Sub on
// Topic:orders* and Sub on Group:orders-consumer sends and consumes with
// one client instance for its producer and push consumer; a topic outside
// the grant is refused with ACL 2.0's reason, as is a wrong password.
func TestOfficialGoClientACL2(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mq dev")
	}
	rlog.SetLogLevel("error")
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{
		"auth.acl2.enabled=true", "auth.acl2.file=" + filepath.Join(t.TempDir(), "acl2.json"),
		"auth.acl2.init_username=root", "auth.acl2.init_password=root-secret-0123456789",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "root", "root-secret-0123456789", "") }})
	ns := dev.Namesrv
	root := []string{"--access-key", "root", "--secret-key", "root-secret-0123456789"}
	mqOK(t, ns, append([]string{"topic", "create", "--topic", "orders-eu", "--read-queues", "1", "--write-queues", "1"}, root...)...)
	mqOK(t, ns, append([]string{"topic", "create", "--topic", "payments", "--read-queues", "1", "--write-queues", "1"}, root...)...)
	mqOK(t, ns, append([]string{"createUser", "-u", "orders-app", "-p", "orders-secret-0123"}, root...)...)
	mqOK(t, ns, append([]string{"createAcl", "-s", "User:orders-app", "-r", "Topic:orders*", "-a", "Pub,Sub"}, root...)...)
	mqOK(t, ns, append([]string{"createAcl", "-s", "User:orders-app", "-r", "Group:orders-consumer", "-a", "Sub"}, root...)...)

	cred := primitive.Credentials{AccessKey: "orders-app", SecretKey: "orders-secret-0123"}
	instance := fmt.Sprintf("acl2_%d", time.Now().UnixNano())
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{ns}), producer.WithGroupName("OrdersProducers"),
		producer.WithInstanceName(instance), producer.WithCredentials(cred), producer.WithRetry(0))
	require.NoError(t, err)
	var got atomic.Int64
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{ns}), consumer.WithGroupName("orders-consumer"),
		consumer.WithInstance(instance), consumer.WithCredentials(cred), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("orders-eu", consumer.MessageSelector{}, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		got.Add(int64(len(ms)))
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		res, err := p.SendSync(ctx, primitive.NewMessage("orders-eu", []byte("order 1")))
		return err == nil && res.Status == primitive.SendOK
	}, 15*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool { return got.Load() >= 1 }, 30*time.Second, 50*time.Millisecond, "the push consumer got nothing")

	_, err = p.SendSync(ctx, primitive.NewMessage("payments", []byte("no")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "User:orders-app has no permission to access Topic:payments")

	bad, err := rocketmq.NewProducer(producer.WithNameServer([]string{ns}), producer.WithGroupName("OrdersProducers"),
		producer.WithInstanceName(instance+"_bad"), producer.WithCredentials(primitive.Credentials{AccessKey: "orders-app", SecretKey: "wrong"}), producer.WithRetry(0))
	require.NoError(t, err)
	require.NoError(t, bad.Start())
	t.Cleanup(func() { _ = bad.Shutdown() })
	_, err = bad.SendSync(ctx, primitive.NewMessage("orders-eu", []byte("no")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "check signature failed for User:orders-app")
}
