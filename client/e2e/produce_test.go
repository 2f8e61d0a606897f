package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
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

// TestAsyncBatching: 3,000 pipelined async sends against a real broker go
// out mostly as automatic batches; every callback's MsgID, OffsetMsgID,
// queue and queue offset are those of the message a consumer then reads
// there, and every message is stored once.
func TestAsyncBatching(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		topic := uniq("AutoBatch")
		e.createTopic(t, topic, 4)
		p := e.producer(t)
		const n = 3000
		var mu sync.Mutex
		results := map[string]*client.SendResult{}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 256)
		for i := 0; i < n; i++ {
			sem <- struct{}{}
			wg.Add(1)
			body := fmt.Sprintf("auto-%d", i)
			require.NoError(t, p.SendAsync(context.Background(), func(_ context.Context, r *client.SendResult, err error) {
				defer wg.Done()
				defer func() { <-sem }()
				if assert.NoError(t, err, body) {
					mu.Lock()
					results[body] = r
					mu.Unlock()
				}
			}, msg(topic, body).SetKeys("key-"+body)))
		}
		wg.Wait()
		require.Len(t, results, n)

		col := newCollector()
		e.push(t, topic, pushOpts{group: uniq("CG")}, col.handle)
		col.wait(t, n, 30*time.Second)
		for body, r := range results {
			got := col.get(body)
			require.NotNil(t, got, body)
			assert.Equal(t, r.MsgID, got.MsgID, body)
			assert.Equal(t, r.OffsetMsgID, got.OffsetMsgID, body)
			assert.Equal(t, r.Queue.QueueID, got.Queue.QueueID, body)
			assert.Equal(t, r.QueueOffset, got.QueueOffset, body)
			assert.Equal(t, []string{"key-" + body}, got.Keys())
		}
		consecutive := 0
		for i := 0; i+1 < n; i++ {
			r, nr := results[fmt.Sprintf("auto-%d", i)], results[fmt.Sprintf("auto-%d", i+1)]
			if nr.Queue == r.Queue && nr.QueueOffset == r.QueueOffset+1 {
				consecutive++
			}
		}
		// Round robin puts lone sends on the queues in turn; a batch puts
		// its messages one after the other on one queue.
		assert.Greater(t, consecutive, n/2, "most messages were sent in batches")
		assert.Equal(t, n, col.count(), "each message stored once")
	})
}

// TestAsyncBatchingWithACL: with ACL on, automatic batches (whose body is
// sent as a vector) carry a signature the broker accepts, and a wrong
// secret is refused for every message of a batch.
func TestAsyncBatchingWithACL(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(`accounts:
  - accessKey: batchKey
    secretKey: batchSecret
    admin: true
`), 0o600))
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + file,
		"acl.access_key=batchKey", "acl.secret_key=batchSecret"},
		Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "batchKey", "batchSecret", "") }})
	e := &env{srv: srv, ns: srv.Namesrv}
	topic := uniq("AclBatch")
	for _, tc := range []struct {
		secret string
		ok     bool
	}{{"batchSecret", true}, {"wrong", false}} {
		p, err := producer.New(e.client(t, client.WithCredentials("batchKey", tc.secret, "")), uniq("PG"))
		require.NoError(t, err)
		const n = 400
		var okN, failN atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			require.NoError(t, p.SendAsync(context.Background(), func(_ context.Context, _ *client.SendResult, err error) {
				defer wg.Done()
				if err == nil {
					okN.Add(1)
				} else {
					failN.Add(1)
				}
			}, msg(topic, fmt.Sprintf("acl-%d", i))))
		}
		wg.Wait()
		require.NoError(t, p.Shutdown(context.Background()))
		if tc.ok {
			assert.EqualValues(t, n, okN.Load(), "accepted with the right secret")
		} else {
			assert.EqualValues(t, n, failN.Load(), "refused with a wrong secret")
		}
	}
}
