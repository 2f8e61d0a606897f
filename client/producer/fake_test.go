package producer_test

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// fakeBroker answers SEND_MESSAGE with a chosen code, records requests
// and can call the client back.
type fakeBroker struct {
	name string
	addr string
	srv  *remoting.Server
	code int32 // answer to sends
	hang bool  // never answer sends
	// gate, when set, holds every send until a value arrives on it
	gate chan struct{}

	mu     sync.Mutex
	reqs   []*remoting.Command
	peers  []*remoting.Peer
	offset int64
}

func (b *fakeBroker) handle(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	if req.Code == remoting.HeartBeat {
		b.peers = append(b.peers, p)
	}
	n := int64(1)
	if req.Code == remoting.SendBatchMessage {
		items, err := message.DecodeBatch(req.Body)
		if err != nil {
			b.mu.Unlock()
			return remoting.NewResponse(req, remoting.MessageIllegal, err.Error())
		}
		n = int64(len(items))
	}
	off := b.offset + 1
	b.offset += n
	gate := b.gate
	b.mu.Unlock()
	switch req.Code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage:
		if b.hang {
			return nil
		}
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil
			}
		}
		resp := remoting.NewResponse(req, b.code, "")
		if b.code == remoting.Success {
			// as a broker answers: one offset message id per message
			// (comma-separated for a batch), the first queue offset
			ids := make([]string, n)
			for i := range ids {
				ids[i] = message.OffsetMsgID(parseAddr(b.addr), (off+int64(i))*100)
			}
			resp.SetExt("msgId", strings.Join(ids, ","))
			resp.SetExt("queueId", req.Ext("e"))
			resp.SetExt("queueOffset", strconv.FormatInt(off, 10))
		} else {
			resp.Remark = "[TIMEOUT_CLEAN_QUEUE]broker busy"
		}
		return resp
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *fakeBroker) requests(code int32) []*remoting.Command {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*remoting.Command
	for _, r := range b.reqs {
		if r.Code == code {
			out = append(out, r)
		}
	}
	return out
}

// sentMessages counts the messages of the send requests: one per
// SEND_MESSAGE(_V2), the items of a SEND_BATCH_MESSAGE.
func (b *fakeBroker) sentMessages(t *testing.T) int {
	n := len(b.requests(remoting.SendMessageV2)) + len(b.requests(remoting.SendMessage))
	for _, r := range b.requests(remoting.SendBatchMessage) {
		items, err := message.DecodeBatch(r.Body)
		require.NoError(t, err)
		n += len(items)
	}
	return n
}

func (b *fakeBroker) peer() *remoting.Peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.peers) == 0 {
		return nil
	}
	return b.peers[len(b.peers)-1]
}

type fakeCluster struct {
	ns      string
	brokers []*fakeBroker
}

func listen(t *testing.T, h remoting.Handler) (*remoting.Server, string) {
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcp.NewConfig(), 0)
	require.NoError(t, err)
	srv := remoting.NewServer(h, nil, remoting.ServerOptions{})
	srv.Serve(ln)
	t.Cleanup(func() { srv.Close(context.Background()) })
	return srv, ln.Addr()
}

// newCluster starts a name server routing every topic to the brokers,
// two write queues each.
func newCluster(t *testing.T, brokers ...*fakeBroker) *fakeCluster {
	fc := &fakeCluster{brokers: brokers}
	for _, b := range brokers {
		b.srv, b.addr = listen(t, remoting.HandlerFunc(b.handle))
	}
	_, fc.ns = listen(t, remoting.HandlerFunc(func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetRouteInfoByTopic {
			return remoting.NewResponse(req, remoting.RequestCodeNotSupported, "")
		}
		rd := protocol.TopicRouteData{}
		for _, b := range fc.brokers {
			rd.BrokerDatas = append(rd.BrokerDatas, protocol.BrokerData{Cluster: "c", BrokerName: b.name, BrokerAddrs: map[int64]string{0: b.addr}})
			rd.QueueDatas = append(rd.QueueDatas, protocol.QueueData{BrokerName: b.name, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = rd.Encode()
		return resp
	}))
	return fc
}

func parseAddr(a string) netip.AddrPort { return netip.MustParseAddrPort(a) }
