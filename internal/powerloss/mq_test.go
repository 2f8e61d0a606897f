package powerloss_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/crashfs"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func mqClient(t *testing.T) *remoting.Client {
	set := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	c := remoting.NewClient(set.Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func call(t *testing.T, c *remoting.Client, addr string, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	require.NoError(t, err)
	return resp
}

// TestMQPowerLoss runs a whole `mq dev` process on each engine with
// storage.flush=sync on a crashfs, from an empty disk: messages to a topic
// it creates on the first send are acknowledged, the process is killed and
// the disk keeps only what was durable; mq restarted on that disk serves
// every acknowledged message and still knows the topic (topics.json).
func TestMQPowerLoss(t *testing.T) {
	for _, engine := range []string{"commitlog", "pebble"} {
		t.Run(engine, func(t *testing.T) { mqPowerLoss(t, engine) })
	}
}

func mqPowerLoss(t *testing.T, engine string) {
	fsys := crashfs.Mount(t, t.TempDir())
	sets := []string{"storage.flush=sync"}
	env := []string{"QUIVER_STORAGE__ENGINE=" + engine}
	p := testserver.StartDev(t, testserver.Options{Dir: fsys.Dir, Sets: sets, Env: env})
	c := mqClient(t)
	type sent struct {
		q    int
		off  int64
		body string
	}
	var acks []sent
	for i := range 60 {
		body := fmt.Sprintf("power-loss-%d", i)
		q := i % 4
		ext := map[string]string{
			"producerGroup": "PG", "topic": "PowerLossMQ", "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "4", "queueId": strconv.Itoa(q), "sysFlag": "0",
			"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
			"properties": "", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false",
		}
		resp := call(t, c, p.Broker, remoting.SendMessage, ext, []byte(body))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		off, err := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
		require.NoError(t, err)
		acks = append(acks, sent{q, off, body})
	}
	p.Kill()
	img, st := fsys.Crash()
	t.Logf("crashfs: %+v", st)
	fsys.Close()

	r := testserver.StartDev(t, testserver.Options{Dir: img, Sets: sets, Env: env})
	c2 := mqClient(t)
	got := map[int]map[int64]string{}
	for q := range 4 {
		got[q] = map[int64]string{}
		for off := int64(0); ; {
			ext := map[string]string{
				"consumerGroup": "CG", "topic": "PowerLossMQ", "queueId": strconv.Itoa(q),
				"queueOffset": strconv.FormatInt(off, 10), "maxMsgNums": "32", "sysFlag": "4",
				"commitOffset": "-1", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
			}
			resp := call(t, c2, r.Broker, remoting.PullMessage, ext, nil)
			if resp.Code != remoting.Success {
				if off == 0 {
					t.Logf("queue %d: pull answered %d %q", q, resp.Code, resp.Remark)
				}
				break
			}
			msgs, err := message.DecodeAll(resp.Body)
			require.NoError(t, err)
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				got[q][m.QueueOffset] = string(m.Body)
				off = m.QueueOffset + 1
			}
		}
	}
	lost := 0
	for _, a := range acks {
		if got[a.q][a.off] != a.body {
			lost++
		}
	}
	assert.Zero(t, lost, "acknowledged messages lost of %d (engine %s)", len(acks), engine)
	route := call(t, c2, r.Namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": "PowerLossMQ"}, nil)
	assert.Equal(t, remoting.Success, route.Code, "the topic survived the power loss: %s", route.Remark)
}
