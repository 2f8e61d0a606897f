package interop

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// TestACLWhiteListModes (issue 22): RocketMQ's white lists by default —
// from a globally white-listed address unsigned admin calls succeed, from
// an account's white-listed address a wrong signature passes and a
// non-admin deletes a topic — and with acl.strict_white_list those admin
// calls need a valid signature of an admin, while ordinary requests keep
// the bypass. The start-up log names the addresses that bypass signatures.
func TestACLWhiteListModes(t *testing.T) {
	const rules = `globalWhiteRemoteAddresses:
  - 127.0.0.2
accounts:
  - accessKey: appKey01
    secretKey: appSecret01
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: PUB|SUB
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
`
	invokeFrom := func(t *testing.T, local, addr string, req *remoting.Command) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rawClientFrom(t, local).Invoke(ctx, addr, req)
		require.NoError(t, err)
		return resp
	}
	create := func(t *testing.T, srv *testserver.Proc) string {
		topic := uniq("White")
		resp := signedInvoke(t, srv.Broker, remoting.UpdateAndCreateTopic,
			map[string]string{"topic": topic, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, "adminKey01", "adminSecret01")
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		return topic
	}
	del := func(topic string) *remoting.Command {
		return remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil)
	}
	wrongSig := func(topic string) *remoting.Command {
		req := del(topic)
		req.ExtFields["AccessKey"], req.ExtFields["Signature"] = "appKey01", "bm90IGEgc2lnbmF0dXJl"
		return req
	}

	for _, strict := range []bool{false, true} {
		name := map[bool]string{false: "rocketmq semantics", true: "strict_white_list"}[strict]
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "plain_acl.yml")
			require.NoError(t, os.WriteFile(file, []byte(rules), 0o644))
			sets := []string{"acl.enabled=true", "acl.file=" + file}
			if strict {
				sets = append(sets, "acl.strict_white_list=true")
			}
			srv := testserver.StartDev(t, testserver.Options{Sets: sets})
			logs := srv.LogTail(400)
			assert.Contains(t, logs, "white-listed addresses skip signature checks")
			assert.Contains(t, logs, "127.0.0.2")
			assert.Contains(t, logs, "appKey01:127.0.0.1")

			global := invokeFrom(t, "127.0.0.2", srv.Broker, del(create(t, srv)))
			account := invokeFrom(t, "127.0.0.1", srv.Broker, wrongSig(create(t, srv)))
			if !strict {
				assert.Equal(t, remoting.Success, global.Code, "unsigned admin call from the global white list: %s", global.Remark)
				assert.Equal(t, remoting.Success, account.Code, "wrong signature, non-admin, from the account's white list: %s", account.Remark)
				return
			}
			assert.Equal(t, remoting.NoPermission, global.Code)
			assert.Contains(t, global.Remark, "acl.strict_white_list")
			assert.Equal(t, remoting.NoPermission, account.Code)
			assert.Contains(t, account.Remark, "Check signature failed for accessKey=appKey01")
			// An admin's signature from a white-listed address passes.
			signedDel := del(create(t, srv))
			acl.Sign(signedDel.ExtFields, nil, "adminKey01", "adminSecret01", "")
			resp := invokeFrom(t, "127.0.0.2", srv.Broker, signedDel)
			assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
			// Ordinary requests keep the bypass: a wrong signature still sends.
			send := remoting.NewRequest(remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": create(t, srv),
				"defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0",
				"flag": "0", "properties": "", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false",
				"AccessKey": "appKey01", "Signature": "bm90IGEgc2lnbmF0dXJl"}, []byte("x"))
			resp = invokeFrom(t, "127.0.0.1", srv.Broker, send)
			assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
			assert.False(t, strings.Contains(resp.Remark, "acl"))
		})
	}
}

// rawClientFrom dials from the loopback address local (127.0.0.0/8 is all
// loopback on Linux), so the server sees that address.
func rawClientFrom(t *testing.T, local string) *remoting.Client {
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return tcp.NewConn(nc, tcp.NewConfig(), 0), nil
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}
