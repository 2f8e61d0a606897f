package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// TestTLSWithOfficialClient: `mq dev --tls` serves the official client's
// WithTls option end to end, and a plaintext client fails cleanly.
func TestTLSWithOfficialClient(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{TLS: true})
	// The official client keeps UseTls in a process-wide default config
	// that WithTls mutates: turn it off again for the tests that follow.
	// The producer needs an instance name of its own: the client keeps
	// every instance it creates for the life of the process, and refuses
	// one whose name it has seen with other name servers (this test's
	// second run under -count=2, with the default name).
	t.Cleanup(func() {
		_, err := rocketmq.NewProducer(producer.WithNameServer([]string{srv.Namesrv}),
			producer.WithInstanceName(uniq("tlsoff")), producer.WithTls(false))
		require.NoError(t, err)
	})
	topic := uniq("TLS")
	p := newProducer(t, srv.Namesrv, producer.WithTls(true))
	for i := 0; i < 5; i++ {
		sendSync(t, p, primitive.NewMessage(topic, []byte(fmt.Sprintf("tls-%d", i))))
	}
	// Quiver's own dialer, trusting the development certificate.
	cfg := tcp.NewConfig()
	cfg.TLS = tcp.TLSConfig{Enabled: true, CAFile: filepath.Join(srv.Dir, "store", "tls", "dev-cert.pem")}
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, cfg, 0)
	}, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, srv.Namesrv, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		return err == nil && resp.Code == remoting.Success
	}, 15*time.Second, 50*time.Millisecond, "route over TLS")

	col := newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CG"), skipRouteWait: true, extra: []consumer.Option{consumer.WithTls(true)}}, col.handle)
	col.waitFor(t, 5, 30*time.Second)
	var err error

	// A plaintext client cannot talk to the TLS ports: its request fails
	// (the official client would too, but it cannot be switched back to
	// plaintext in a process where WithTls was used, see above).
	for _, addr := range []string{srv.Namesrv, srv.Broker} {
		pc := rawClient(t)
		pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = pc.Invoke(pctx, addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		pcancel()
		assert.Error(t, err, "plaintext request to %s got an answer", addr)
	}
	// And the TLS clients keep working.
	sendSync(t, p, primitive.NewMessage(topic, []byte("after-plaintext")))
	col.waitFor(t, 6, 30*time.Second)
}
