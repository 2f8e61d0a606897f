package grpc_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
	"github.com/quivermq/quiver/modules/pop"
	"github.com/quivermq/quiver/modules/schedule"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is a broker on a commitlog store with the schedule service and the
// gRPC endpoint on 127.0.0.1, and a generated gRPC client dialled to it.
type node struct {
	t   testing.TB
	b   *broker.Broker
	srv *grpcmod.Server
	cli grpcapi.MessagingServiceClient
	rc  *client.Client // a 4.x remoting client for pulls
}

func startNode(t testing.TB) *node { return startNodeWith(t, false) }

// nodeOpt changes the endpoint's configuration or dependencies before it
// is made.
type nodeOpt func(*grpcmod.Config, *grpcmod.Deps)

// startNodeWith starts a node; withPop adds the pop service behind the
// consumption RPCs.
func startNodeWith(t testing.TB, withPop bool, opts ...nodeOpt) *node {
	t.Helper()
	// The store's record limit as the kernel opens it: the broker's max
	// message size plus room for the properties.
	return startNodeStore(t, 4<<20+store.RecordReserve, withPop, opts...)
}

// startNodeStore starts a node whose store refuses records over
// storeMax bytes.
func startNodeStore(t testing.TB, storeMax int, withPop bool, opts ...nodeOpt) *node {
	t.Helper()
	dir := t.TempDir()
	st, err := commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: store.Settings{
		Dir: dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: storeMax,
	}})
	require.NoError(t, err)
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	bc.ScanInterval = time.Hour
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	ts := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: ts, DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	sched, err := schedule.New(schedule.NewConfig(), b)
	require.NoError(t, err)
	gc := grpcmod.NewConfig()
	gc.Enabled = true
	gc.Listen = "127.0.0.1:0"
	var ps *pop.Service
	if withPop {
		ps, err = pop.New(pop.NewConfig(), b)
		require.NoError(t, err)
	}
	deps := grpcmod.Deps{Broker: b, Pop: ps, Schedule: sched}
	for _, o := range opts {
		o(gc, &deps)
	}
	srv, err := grpcmod.New(gc, deps)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, b.Start(ctx))
	require.NoError(t, sched.Start(ctx))
	require.NoError(t, srv.Start(ctx))
	conn, err := grpclib.NewClient(srv.Addr().String(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	rc, err := client.New(client.WithNameServers(b.Addrs()[0]), transports.WithDialer()) // never asked: pulls go to the broker
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, rc.Close())
		require.NoError(t, conn.Close())
		require.NoError(t, srv.Stop(ctx))
		require.NoError(t, sched.Stop(ctx))
		if ps != nil {
			require.NoError(t, ps.Close())
		}
		require.NoError(t, b.Stop(ctx))
		require.NoError(t, st.Close())
	})
	return &node{t: t, b: b, srv: srv, cli: grpcapi.NewMessagingServiceClient(conn), rc: rc}
}

// ctx is a request context carrying the metadata 5.x clients send.
func (n *node) ctx() context.Context { return n.ctxAs("test-client@1") }

// ctxAs is ctx for the client id id.
func (n *node) ctxAs(id string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n.t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", id, "x-mq-language", "GOLANG", "x-mq-protocol", "v2")
}

func (n *node) topic(name string, queues int32) {
	n.t.Helper()
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: protocol.PermRead | protocol.PermWrite})
	require.NoError(n.t, err)
}

// pull reads a queue over the 4.x remoting protocol (PULL_MESSAGE), as a
// 4.x consumer does; nil when the queue has nothing at offset.
func (n *node) pull(topic string, queue int32, offset int64) []*client.MessageExt {
	n.t.Helper()
	req := client.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": "g4x", "topic": topic, "queueId": strconv.Itoa(int(queue)),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "32", "sysFlag": "4", // FLAG_SUBSCRIPTION: the expression is in the request
		"commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
	}, nil)
	resp, err := n.rc.Invoke(n.ctx(), n.b.Addrs()[0], req)
	require.NoError(n.t, err)
	if resp.Code != remoting.Success {
		n.t.Logf("pull %s/%d@%d: code %d %s", topic, queue, offset, resp.Code, resp.Remark)
		return nil
	}
	msgs, err := client.DecodeMessages(resp.Body, n.b.Config().Name)
	require.NoError(n.t, err)
	return msgs
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, msg)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}
