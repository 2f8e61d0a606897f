package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
)

func forSchemes(t *testing.T, f func(t *testing.T, s scheme)) {
	for _, s := range []scheme{tcpScheme, quicScheme} {
		t.Run(string(s), func(t *testing.T) { f(t, s) })
	}
}

// TestSendModes sends sync (through TBW102 auto-creation), async, oneway,
// batch and a compressed body, and checks a clustering push consumer gets
// each with tags, keys, properties and ids.
func TestSendModes(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		topic := uniq("SendModes")
		p := e.producer(t)
		want := map[string]*client.Message{}
		mk := func(body, tag string) *client.Message {
			m := msg(topic, body).SetTag(tag).SetKeys("k-"+body, "second").SetProperty("color", "blue-"+body)
			want[body] = m
			return m
		}
		var ids []string
		for i := 0; i < 5; i++ {
			res := sendSync(t, p, mk(fmt.Sprintf("sync-%d", i), "TagA"))
			assert.Len(t, res.OffsetMsgID, 32)
			assert.Len(t, res.MsgID, 32)
			ids = append(ids, res.MsgID)
		}
		var wg sync.WaitGroup
		for i := 0; i < 5; i++ {
			wg.Add(1)
			require.NoError(t, p.SendAsync(context.Background(), func(_ context.Context, r *client.SendResult, err error) {
				defer wg.Done()
				assert.NoError(t, err)
			}, mk(fmt.Sprintf("async-%d", i), "TagB")))
		}
		wg.Wait()
		for i := 0; i < 5; i++ {
			require.NoError(t, p.SendOneway(context.Background(), mk(fmt.Sprintf("oneway-%d", i), "TagC")))
		}
		var batch []*client.Message
		for i := 0; i < 5; i++ {
			batch = append(batch, mk(fmt.Sprintf("batch-%d", i), "TagD"))
		}
		res := sendSync(t, p, batch...)
		assert.Len(t, strings.Split(res.OffsetMsgID, ","), 5)
		big := bytes.Repeat([]byte("z"), 10000)
		bm := client.NewMessage(topic, big).SetTag("Big")
		sendSync(t, p, bm)

		col := newCollector()
		e.push(t, topic, pushOpts{group: uniq("CG")}, col.handle)
		col.wait(t, len(want)+1, 30*time.Second)
		for body, w := range want {
			got := col.get(body)
			require.NotNil(t, got, body)
			assert.Equal(t, w.Tag(), got.Tag())
			assert.Equal(t, w.Keys(), got.Keys())
			assert.Equal(t, "blue-"+body, got.Property("color"))
			assert.Equal(t, topic, got.Topic)
		}
		for _, id := range ids {
			found := false
			for _, b := range col.bodies() {
				if col.get(b).MsgID == id {
					found = true
				}
			}
			assert.True(t, found, "msgId %s not consumed", id)
		}
		got := col.get(string(big))
		require.NotNil(t, got, "compressed message not consumed")
		assert.Equal(t, big, got.Body)
		assert.NotZero(t, got.SysFlag&message.FlagCompressed, "a 10000-byte body is sent compressed")
	})
}
