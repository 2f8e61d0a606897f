package schedule

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// wire is a remoting client of a node's broker over TCP on loopback.
type wire struct {
	t    *testing.T
	c    *remoting.Client
	addr string
}

func dialWire(t *testing.T, addr string) *wire {
	t.Helper()
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return &wire{t: t, c: c, addr: addr}
}

func (w *wire) invoke(req *remoting.Command) *remoting.Command {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := w.c.Invoke(ctx, w.addr, req)
	require.NoError(w.t, err)
	return resp
}

// send sends one message with SEND_MESSAGE, as the 4.x clients do.
func (w *wire) send(topic, body string, props message.Properties) *remoting.Command {
	w.t.Helper()
	resp := w.invoke(remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "1",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "16", "batch": "false",
	}, []byte(body)))
	require.Equal(w.t, remoting.Success, resp.Code, resp.Remark)
	return resp
}

// recall sends RECALL_MESSAGE as Java's MQClientAPIImpl.recallMessage
// does (the RPC header's bname included).
func (w *wire) recall(topic, handle string) *remoting.Command {
	w.t.Helper()
	return w.invoke(remoting.NewRequest(remoting.RecallMessage, map[string]string{
		"producerGroup": "PG", "topic": topic, "recallHandle": handle, "bname": "broker-a",
	}, nil))
}

func rawHandle(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }

// TestRecallOverRemoting: a timer message sent over 4.x remoting is
// answered with its recall handle (Java's attachRecallHandle: not for a
// message delivered at once or a delay level), RECALL_MESSAGE with it
// answers SUCCESS with the message id, a second recall SUCCESS again, and
// the message is never delivered while its neighbour is. Every refusal
// carries Java's code and remark, and MSG_REGION.
//
// The timers are due in a minute and the service's clock is moved past
// them once the recalls are done: a recall waits for the timer goroutine,
// busy here for longer (a slow release, as a slow fsync or Put would be)
// than the 1.5 s the timers used to be due in, so the wall clock decides
// nothing (it failed about 1 in 20 runs under -race and load).
func TestRecallOverRemoting(t *testing.T) {
	var shift atomic.Int64 // added to the service's clock
	c := shortConfig()
	c.wheelSlot = 200 * time.Millisecond
	c.now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	n := startNode(t, t.TempDir(), c)
	name := n.b.Config().Name
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: "U", ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite})
	require.NoError(t, err)
	w := dialWire(t, n.b.Addrs()[0])

	// The timer goroutine is busy releasing "slow" while the timers are
	// sent and recalled.
	const busy = 1600 * time.Millisecond
	releasing := make(chan struct{})
	var once sync.Once
	n.b.AddPutHook(func(ctx context.Context, m *message.Ext) (int64, bool, error) {
		if ctx.Value(releasingKey{}) != nil && string(m.Body) == "slow" {
			once.Do(func() { close(releasing) })
			time.Sleep(busy)
		}
		return 0, false, nil
	})
	n.put("S", message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(time.Now().UnixMilli()+50, 10)}, "slow")
	select {
	case <-releasing:
	case <-time.After(10 * time.Second):
		t.Fatal("the timer goroutine did not release the slow message")
	}

	at := time.Now().Add(time.Minute).UnixMilli()
	timer := func(body string) *remoting.Command {
		return w.send("T", body, message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(at, 10), message.PropertyUniqKey: "ID-" + body})
	}
	held := timer("held")
	handle := held.Ext("recallHandle")
	assert.Equal(t, EncodeHandle("T", name, at, "ID-held"), handle, "Java's v1 handle: topic, broker, time+1, UNIQ_KEY")
	keep := timer("keep").Ext("recallHandle")
	require.NotEmpty(t, keep)
	plain := w.send("T", "plain", message.Properties{message.PropertyUniqKey: "ID-plain"})
	assert.Empty(t, plain.Ext("recallHandle"), "delivered at once: no handle")
	level := w.send("T", "level", message.Properties{message.PropertyDelayTimeLevel: "1", message.PropertyUniqKey: "ID-level"})
	assert.Empty(t, level.Ext("recallHandle"), "a delay level: no handle, as in Java")

	resp := w.recall("T", handle)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "ID-held", resp.Ext("msgId"))
	assert.Equal(t, "DefaultRegion", resp.Ext("MSG_REGION"))
	assert.Empty(t, resp.Remark)
	resp = w.recall("T", handle)
	require.Equal(t, remoting.Success, resp.Code, "a second recall is SUCCESS, as Java's: %s", resp.Remark)
	assert.Equal(t, "ID-held", resp.Ext("msgId"))

	h, err := DecodeHandle(keep)
	require.NoError(t, err)
	ts := strconv.FormatInt(h.Timestamp, 10)
	tests := []struct {
		name       string
		ext        map[string]string
		code       int32
		remark     string
		exactMatch bool
	}{
		{"made-up message id", map[string]string{"topic": "T", "recallHandle": EncodeHandle("T", name, at, "ID-none")},
			remoting.IllegalOperation, "recall failed, no such scheduled message", false},
		{"another topic's handle", map[string]string{"topic": "U", "recallHandle": keep}, remoting.IllegalOperation, "recall failed, topic not match", true},
		{"empty handle", map[string]string{"topic": "T", "recallHandle": ""}, remoting.IllegalOperation, "recall handle is invalid", true},
		{"not base64url", map[string]string{"topic": "T", "recallHandle": "a+b/c"}, remoting.IllegalOperation, "recall handle is invalid", true},
		{"v2", map[string]string{"topic": "T", "recallHandle": rawHandle("v2 T " + name + " " + ts + " ID-keep")}, remoting.IllegalOperation, "recall handle is invalid", true},
		{"four fields", map[string]string{"topic": "T", "recallHandle": rawHandle("v1 T " + name + " " + ts + " ")}, remoting.IllegalOperation, "recall handle is invalid", true},
		{"another broker", map[string]string{"topic": "T", "recallHandle": rawHandle("v1 T other " + ts + " ID-keep")}, remoting.IllegalOperation, "recall failed, broker service not available", true},
		{"time passed", map[string]string{"topic": "T", "recallHandle": EncodeHandle("T", name, time.Now().UnixMilli()-1000, "ID-keep")}, remoting.IllegalOperation, "recall failed, timestamp invalid", true},
		{"beyond max delay", map[string]string{"topic": "T", "recallHandle": EncodeHandle("T", name, time.Now().Add(c.MaxDelay+time.Hour).UnixMilli(), "ID-keep")}, remoting.IllegalOperation, "recall failed, timestamp invalid", true},
		{"time not a number", map[string]string{"topic": "T", "recallHandle": rawHandle("v1 T " + name + " soon ID-keep")}, remoting.IllegalOperation, "recall failed, timestamp invalid", true},
		{"unknown topic", map[string]string{"topic": "Nope", "recallHandle": keep}, remoting.TopicNotExist, "recall failed, the topic[Nope] not exist", true},
		{"no topic", map[string]string{"recallHandle": keep}, remoting.SystemError, "the custom field <topic> is null", true},
		{"no handle", map[string]string{"topic": "T"}, remoting.SystemError, "the custom field <recallHandle> is null", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := w.invoke(remoting.NewRequest(remoting.RecallMessage, tt.ext, nil))
			assert.Equal(t, tt.code, resp.Code, resp.Remark)
			if tt.exactMatch {
				assert.Equal(t, tt.remark, resp.Remark)
			} else {
				assert.Contains(t, resp.Remark, tt.remark)
			}
			assert.Empty(t, resp.Ext("msgId"))
			assert.Equal(t, "DefaultRegion", resp.Ext("MSG_REGION"))
		})
	}

	t.Run("slave", func(t *testing.T) {
		master := n.b.Role()
		n.b.SetRole(broker.RoleState{Role: broker.RoleSlave, ID: 1})
		defer n.b.SetRole(master)
		resp := w.recall("T", keep)
		assert.Equal(t, remoting.SlaveNotAvailable, resp.Code, resp.Remark)
		assert.Equal(t, "recall failed, broker service not available", resp.Remark)
	})

	// The timers come due: keep is delivered, held never is.
	shift.Store(int64(time.Until(time.UnixMilli(at)) + time.Second))
	signal(n.s.timer.wake)
	require.Eventually(t, func() bool { return n.s.Recalled() == 1 && len(n.read("T")) >= 3 }, 10*time.Second, 5*time.Millisecond,
		"held skipped; plain, level and keep delivered")
	var bodies []string
	for _, r := range n.read("T") {
		bodies = append(bodies, r.body)
	}
	assert.ElementsMatch(t, []string{"plain", "level", "keep"}, bodies, "the recalled message is never delivered")
	resp = w.recall("T", keep)
	assert.Equal(t, remoting.IllegalOperation, resp.Code, "delivered: too late")
	assert.Equal(t, "recall failed, timestamp invalid", resp.Remark)
}

// rawConn writes frames by hand on a TCP socket: headers in shapes our
// encoder never writes.
type rawConn struct {
	t *testing.T
	c net.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// frame writes one frame (serialize type st) and reads frames until the
// answer to opaque arrives.
func (r *rawConn) frame(st byte, hdr, body []byte, opaque int32) *remoting.Command {
	r.t.Helper()
	f := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)+len(body)))
	f = binary.BigEndian.AppendUint32(f, uint32(st)<<24|uint32(len(hdr)))
	f = append(append(f, hdr...), body...)
	require.NoError(r.t, r.c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := r.c.Write(f)
	require.NoError(r.t, err)
	for {
		var n [4]byte
		_, err := io.ReadFull(r.c, n[:])
		require.NoError(r.t, err, "reading the answer to %s", hdr)
		frame := make([]byte, binary.BigEndian.Uint32(n[:]))
		_, err = io.ReadFull(r.c, frame)
		require.NoError(r.t, err)
		resp, err := codec.Decode(frame)
		require.NoError(r.t, err)
		if resp.IsResponse() && resp.Opaque == opaque {
			return resp
		}
	}
}

// json sends a JSON header whose extFields is the raw JSON text ext
// (empty: no extFields at all).
func (r *rawConn) json(ext string, opaque int32) *remoting.Command {
	r.t.Helper()
	extPart := ""
	if ext != "" {
		extPart = `"extFields":` + ext + `,`
	}
	hdr := fmt.Sprintf(`{"code":370,%s"flag":0,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":475}`, extPart, opaque)
	return r.frame(codec.SerializeJSON, []byte(hdr), nil, opaque)
}

// TestRecallCraftedFrames: RECALL_MESSAGE headers in odd shapes get
// Java's answers or a clear error, and the same connection keeps being
// served: no extFields, JSON numbers and booleans where Java's client
// writes strings, the RPC header's fields in any shape, a null, a wrong
// shape, the ROCKETMQ binary header, a body.
func TestRecallCraftedFrames(t *testing.T) {
	c := shortConfig()
	n := startNode(t, t.TempDir(), c)
	name := n.b.Config().Name
	w := dialWire(t, n.b.Addrs()[0])
	at := time.Now().Add(time.Minute).UnixMilli()
	var handles []string
	for i := range 3 {
		resp := w.send("T", "m"+strconv.Itoa(i), message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(at, 10), message.PropertyUniqKey: "ID-" + strconv.Itoa(i)})
		handles = append(handles, resp.Ext("recallHandle"))
		require.NotEmpty(t, handles[i])
	}
	r := dialRaw(t, n.b.Addrs()[0])

	resp := r.json("", 1)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "the custom field <topic> is null", resp.Remark)

	resp = r.json(`{"topic":"T","recallHandle":12345}`, 2)
	assert.Equal(t, remoting.IllegalOperation, resp.Code, "a number is its text, as fastjson reads it: %s", resp.Remark)
	assert.Equal(t, "recall handle is invalid", resp.Remark)

	resp = r.json(`{"topic":"T","recallHandle":null}`, 3)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "the custom field <recallHandle> is null", resp.Remark)

	resp = r.json(`["topic","T"]`, 4)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "extFields")

	resp = r.json(`{"topic":"T","recallHandle":{"h":1}}`, 5)
	assert.Equal(t, remoting.SystemError, resp.Code, resp.Remark)
	assert.Contains(t, resp.Remark, "recallHandle")

	// The RPC header's fields in any shape, unknown fields, a producer
	// group as a number: ignored, as Java's lenient decoding does.
	resp = r.json(fmt.Sprintf(`{"producerGroup":7,"topic":"T","recallHandle":%q,"bname":17,"ns":"","nsd":"maybe","oway":false,"lo":1.5,"extra":true}`, handles[0]), 6)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "ID-0", resp.Ext("msgId"))

	// The ROCKETMQ binary header, with a body Java ignores.
	bin := remoting.NewRequest(remoting.RecallMessage, map[string]string{"producerGroup": "PG", "topic": "T", "recallHandle": handles[1]}, []byte("ignored"))
	bin.Opaque, bin.SerializeType = 7, codec.SerializeRocketMQ
	enc := codec.Encode(bin) // header-length word, header, body
	hl := binary.BigEndian.Uint32(enc[:4]) & 0xFFFFFF
	resp = r.frame(codec.SerializeRocketMQ, enc[4:4+hl], enc[4+hl:], 7)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "ID-1", resp.Ext("msgId"))

	// A padded and an unpadded handle are the same handle.
	resp = r.json(fmt.Sprintf(`{"topic":"T","recallHandle":%q}`, base64.RawURLEncoding.EncodeToString([]byte("v1 T "+name+" "+strconv.FormatInt(at+1, 10)+" ID-2"))), 8)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "ID-2", resp.Ext("msgId"))

	// The typed client's connection was served throughout.
	assert.Equal(t, remoting.Success, w.recall("T", handles[0]).Code)
	assert.Equal(t, int64(0), n.s.Recalled(), "nothing came due")
}

// TestRecallScheduleOff: with schedule.enabled=false (the module
// registers only the refusal) RECALL_MESSAGE is NO_PERMISSION, Java's
// answer with recallMessageEnable=false, and a timer message's send
// answer has no handle (it is delivered at once).
func TestRecallScheduleOff(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, "commitlog", dir)
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	bc.ScanInterval = time.Hour
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	ts := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: ts, DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	registerRecallOff(b)
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.Stop(ctx))
		require.NoError(t, st.Close())
	})
	w := dialWire(t, b.Addrs()[0])
	at := time.Now().Add(time.Minute).UnixMilli()
	sent := w.send("T", "timer", message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(at, 10), message.PropertyUniqKey: "ID-t"})
	assert.Empty(t, sent.Ext("recallHandle"))
	resp := w.recall("T", EncodeHandle("T", bc.Name, at, "ID-t"))
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Equal(t, "recall failed, operation is forbidden (schedule.enabled=false)", resp.Remark)
	assert.Equal(t, "DefaultRegion", resp.Ext("MSG_REGION"))
	resp = w.invoke(remoting.NewRequest(remoting.RecallMessage, map[string]string{"recallHandle": "x"}, nil))
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "the custom field <topic> is null", resp.Remark)
}

func TestDecodeJavaHandle(t *testing.T) {
	tests := []struct {
		name string
		give string
		want javaHandle
		ok   bool
	}{
		{"padded", EncodeHandle("T", "b", 9, "id"), javaHandle{"T", "b", "10", "id"}, true},
		{"unpadded", base64.RawURLEncoding.EncodeToString([]byte("v1 T b 10 id")), javaHandle{"T", "b", "10", "id"}, true},
		{"extra fields", rawHandle("v1 T b 10 id more"), javaHandle{"T", "b", "10", "id"}, true},
		{"empty topic is a field", rawHandle("v1  b 10 id"), javaHandle{"", "b", "10", "id"}, true},
		{"trailing spaces dropped", rawHandle("v1 T b 10    "), javaHandle{}, false},
		{"empty", "", javaHandle{}, false},
		{"padding only", "====", javaHandle{}, false},
		{"standard alphabet", "+/+/", javaHandle{}, false},
		{"v2", rawHandle("v2 T b 10 id"), javaHandle{}, false},
		{"v1 only", rawHandle("v1"), javaHandle{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := decodeJavaHandle(tt.give)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
