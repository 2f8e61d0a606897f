package interop

import (
	"context"
	"encoding/binary"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestHostileClients attacks a live `mq dev` with connection churn,
// slow-loris senders, lying frame lengths and absurd field values while a
// well-behaved client keeps working; the broker's memory stays bounded.
func TestHostileClients(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"transport.tcp.read_timeout=2s", "log.level=warn"}})
	good := rawClient(t)
	topic := uniq("Hostile")
	send := func(body string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t0 := time.Now()
		resp, err := good.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.SendMessage, map[string]string{
			"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "0",
			"sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": "", "reconsumeTimes": "0",
			"unitMode": "false", "maxReconsumeTimes": "0", "batch": "false"}, []byte(body)))
		if err == nil && resp.Code != remoting.Success {
			err = &remoting.RemoteError{Code: resp.Code, Remark: resp.Remark}
		}
		return time.Since(t0), err
	}
	var baseline []time.Duration
	for i := 0; i < 50; i++ {
		d, err := send("baseline")
		require.NoError(t, err)
		baseline = append(baseline, d)
	}
	rss0, err := srv.RSS()
	require.NoError(t, err)

	attackCtx, stopAttack := context.WithTimeout(context.Background(), 8*time.Second)
	defer stopAttack()
	var wg sync.WaitGroup
	attack := func(n int, f func(i int)) {
		for g := 0; g < n; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; attackCtx.Err() == nil && i < 1000; i++ {
					f(g*1000 + i)
				}
			}(g)
		}
	}
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", srv.Broker, time.Second)
		if err != nil {
			return nil
		}
		return c
	}
	// 1. Connection churn: thousands of connections opened and dropped.
	var churned sync.Map
	attack(8, func(i int) {
		if c := dial(); c != nil {
			churned.Store(i, true)
			c.Close()
		}
	})
	// 2. Lying lengths: declare 16 MiB, send a few bytes, hold the connection.
	var held sync.Mutex
	var holds []net.Conn
	attack(4, func(i int) {
		if i%1000 >= 50 {
			time.Sleep(50 * time.Millisecond)
			return
		}
		c := dial()
		if c == nil {
			return
		}
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[:], 16<<20-1)
		c.Write(hdr[:])
		held.Lock()
		holds = append(holds, c)
		held.Unlock()
	})
	// 3. Slow loris: a frame trickled one byte at a time.
	attack(20, func(i int) {
		c := dial()
		if c == nil {
			return
		}
		defer c.Close()
		frame := codec.EncodeWithLength(remoting.NewRequest(remoting.HeartBeat, nil, []byte(`{"clientID":"slow"}`)))
		for _, b := range frame {
			if attackCtx.Err() != nil {
				return
			}
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// 4. Absurd field values, on one connection each.
	absurd := []map[string]string{
		{"topic": strings.Repeat("T", 100000), "queueId": "0", "producerGroup": "P"},
		{"topic": "T", "queueId": "-2147483648", "producerGroup": "P"},
		{"topic": "T", "queueId": "99999999999999999999", "producerGroup": "P"},
		{"topic": "T", "queueId": "0", "producerGroup": "P", "properties": strings.Repeat("\x01\x02", 40000)},
		{"consumerGroup": "G", "topic": topic, "queueId": "0", "queueOffset": "-9223372036854775808", "maxMsgNums": "2147483647", "sysFlag": "4", "suspendTimeoutMillis": "999999999999", "subscription": "*"},
	}
	attack(2, func(i int) {
		c := rawClient(t)
		ext := map[string]string{}
		for k, v := range absurd[i%len(absurd)] {
			ext[k] = v
		}
		for j := 0; j < 2000 && i%3 == 0; j++ {
			ext["k"+strconv.Itoa(j)] = "v"
		}
		code := remoting.SendMessage
		if _, ok := ext["consumerGroup"]; ok {
			code = remoting.PullMessage
		}
		ctx, cancel := context.WithTimeout(attackCtx, 2*time.Second)
		c.Invoke(ctx, srv.Broker, remoting.NewRequest(code, ext, make([]byte, 1024)))
		cancel()
		c.Close()
	})

	// The well-behaved client keeps working during the attack.
	var during []time.Duration
	for attackCtx.Err() == nil {
		d, err := send("during")
		require.NoError(t, err, "a well-behaved request failed during the attack")
		during = append(during, d)
		time.Sleep(20 * time.Millisecond)
	}
	rss1, err := srv.RSS()
	require.NoError(t, err)
	wg.Wait()
	held.Lock()
	for _, c := range holds {
		c.Close()
	}
	n := len(holds)
	held.Unlock()

	p := func(ds []time.Duration, q float64) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(q*float64(len(s)-1))]
	}
	churn := 0
	churned.Range(func(any, any) bool { churn++; return true })
	t.Logf("churned %d connections, %d lying-length connections held; good client p50 %v → %v, p99 %v → %v; RSS %d MiB → %d MiB",
		churn, n, p(baseline, .5), p(during, .5), p(baseline, .99), p(during, .99), rss0>>20, rss1>>20)
	assert.Greater(t, churn, 1000, "the churn attack ran")
	assert.NotEmpty(t, during)
	// 16 MiB declared on each held connection would be GiBs if allocated.
	assert.Less(t, rss1-rss0, int64(256<<20), "broker memory grew by %d MiB under attack", (rss1-rss0)>>20)
	// And afterwards everything is normal again.
	_, err = send("after")
	assert.NoError(t, err)
}
