package grpc_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// startBroker runs `mq broker` (name, remoting listen, name server, gRPC
// listen) until the test ends.
func startBroker(t *testing.T, name, listen, namesrv, grpcListen string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testserver.Binary(t), "broker",
		"--set", "broker.name="+name, "--set", "broker.listen="+listen, "--set", "broker.namesrv="+namesrv,
		"--set", "grpc.enabled=true", "--set", "grpc.listen="+grpcListen,
		"--set", "storage.dir="+filepath.Join(dir, "store"), "--set", "console.listen=", "--set", "metrics.listen=",
		"--set", "log.level=warn")
	cmd.Dir = dir
	var logs limitedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("mq broker %s log:\n%s", name, logs.String())
		}
	})
}

// TestRoutesOverTwoBrokers: two brokers of one cluster (mq dev's broker-a
// on 127.0.0.1 and an `mq broker` broker-b on 127.0.0.2, the same gRPC
// port on both, as RocketMQ 5's local proxy mode) host a topic; a 5.x
// client asking broker-a's endpoint gets the queues of both with each
// broker's endpoint, sends through each endpoint to its broker and
// receives from both through the assignments.
func TestRoutesOverTwoBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts two mq processes")
	}
	port := testserver.FreePort(t)
	a := testserver.StartDev(t, testserver.Options{Sets: []string{fmt.Sprintf("grpc.listen=127.0.0.1:%d", port), "log.level=warn"}})
	bAddr := fmt.Sprintf("127.0.0.2:%d", testserver.FreePort(t))
	startBroker(t, "broker-b", bAddr, a.Namesrv, fmt.Sprintf("127.0.0.2:%d", port))

	rc := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	defer rc.Close()
	invoke := func(addr string, code int32, ext map[string]string) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
		require.NoError(t, err)
		return resp
	}
	// broker-b registers with the name server; then the topic goes on both.
	eventually(t, 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, bAddr, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
		return err == nil && resp.Code == remoting.Success
	}, "broker-b serves")
	for _, addr := range []string{a.Broker, bAddr} {
		resp := invoke(addr, remoting.UpdateAndCreateTopic, map[string]string{"topic": "TwoT", "defaultTopic": protocol.AutoCreateTopic,
			"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}

	dial := func(addr string) grpcapi.MessagingServiceClient {
		conn, err := grpclib.NewClient(addr, grpclib.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return grpcapi.NewMessagingServiceClient(conn)
	}
	ctx := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return metadata.AppendToOutgoingContext(c, "x-mq-client-id", "route-client@1")
	}
	entry := dial(fmt.Sprintf("127.0.0.1:%d", port))
	endpoints := map[string]string{} // broker name -> gRPC endpoint
	eventually(t, 30*time.Second, func() bool {
		rt, err := entry.QueryRoute(ctx(), &grpcapi.QueryRouteRequest{Topic: res("TwoT")})
		require.NoError(t, err)
		clear(endpoints)
		for _, q := range rt.GetMessageQueues() {
			as := q.GetBroker().GetEndpoints().GetAddresses()
			require.Len(t, as, 1)
			endpoints[q.GetBroker().GetName()] = fmt.Sprintf("%s:%d", as[0].GetHost(), as[0].GetPort())
		}
		return len(endpoints) == 2 && len(rt.GetMessageQueues()) == 4
	}, "the route lists both brokers' queues")
	assert.Equal(t, map[string]string{"broker-a": fmt.Sprintf("127.0.0.1:%d", port), "broker-b": fmt.Sprintf("127.0.0.2:%d", port)}, endpoints)

	as, err := entry.QueryAssignment(ctx(), &grpcapi.QueryAssignmentRequest{Topic: res("TwoT"), Group: res("GTwo")})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, as.GetStatus().GetCode(), as.GetStatus().GetMessage())
	assigned := map[string]bool{}
	for _, a := range as.GetAssignments() {
		assigned[a.GetMessageQueue().GetBroker().GetName()] = true
		assert.Equal(t, int32(-1), a.GetMessageQueue().GetId())
	}
	assert.Equal(t, map[string]bool{"broker-a": true, "broker-b": true}, assigned)

	// Send through each broker's endpoint, receive from each.
	sent := map[string]string{}
	for bn, ep := range endpoints {
		cli := dial(ep)
		for i := range 3 {
			id := fmt.Sprintf("%s-%d", bn, i)
			resp, err := cli.SendMessage(ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg("TwoT", id, "on "+bn, nil)}})
			require.NoError(t, err)
			require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
			sent[id] = bn
		}
	}
	got := map[string]string{}
	for bn, ep := range endpoints {
		cli := dial(ep)
		eventually(t, 15*time.Second, func() bool {
			rs, err := cli.ReceiveMessage(ctx(), receiveReq("GTwo", "TwoT"))
			require.NoError(t, err)
			_, msgs := drain(t, rs)
			for _, m := range msgs {
				got[m.GetSystemProperties().GetMessageId()] = bn
				assert.True(t, strings.HasSuffix(string(m.GetBody()), bn), "%s came from its own broker", m.GetSystemProperties().GetMessageId())
			}
			n := 0
			for _, b := range got {
				if b == bn {
					n++
				}
			}
			return n == 3
		}, "3 messages received from "+bn)
	}
	assert.Equal(t, sent, got, "every message received once, from the broker it was sent to")

}
