package mirror_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// mirrorKills is how many times TestMirrorSIGKILL kills the mirror (10
// with -tags soak: soak_test.go).
var mirrorKills = 3

// producing sends n messages to topic in the background, a few at a
// time; wait returns their ids.
type producing struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	ids  []string
	errs []error
}

func produce(t testing.TB, p *producer.Producer, topic string, n int) *producing {
	pr := &producing{}
	pr.wg.Add(1)
	go func() {
		defer pr.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		for i := 0; i < n; i++ {
			m := client.NewMessage(topic, []byte("m-"+strconv.Itoa(i)))
			r, err := p.SendSync(ctx, m)
			pr.mu.Lock()
			if err != nil {
				pr.errs = append(pr.errs, err)
			} else {
				pr.ids = append(pr.ids, r.MsgID)
			}
			pr.mu.Unlock()
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond) // pacing, so kills land mid-stream
			}
		}
	}()
	return pr
}

func (pr *producing) wait(t testing.TB) []string {
	pr.wg.Wait()
	require.Empty(t, pr.errs, "sends to the source")
	return pr.ids
}

// TestMirrorSIGKILL: the mirror, its own process, is killed with SIGKILL
// while messages flow; each time it resumes from the checkpoint in the
// target and the target refuses the replayed copies: 0 lost, 0
// duplicates.
func TestMirrorSIGKILL(t *testing.T) {
	src := startCluster(t, "edge", false)
	dst := startCluster(t, "central", false)
	src.createTopic("events", 4)
	_, p := src.producer("kill")
	n := 400 * (mirrorKills + 1)
	pr := produce(t, p, "events", n)
	mp := startMirrorProc(t, fastLink("kill", src, dst, "events"))
	last := 0
	for i := 0; i < mirrorKills; i++ {
		waitFor(t, 60*time.Second, "progress before kill "+strconv.Itoa(i+1), func() bool {
			c := len(dst.readAll("events"))
			if c > last+100 || c >= n {
				last = c
				return true
			}
			return false
		})
		mp.kill()
		mp.start()
	}
	sent := pr.wait(t)
	require.Len(t, sent, n)
	var got []*client.MessageExt
	waitFor(t, 90*time.Second, "every message in the target", func() bool {
		got = dst.readAll("events")
		lost, _ := lostAndDup(sent, got)
		return len(lost) == 0
	})
	lost, dup := lostAndDup(sent, got)
	assert.Empty(t, lost, "lost")
	assert.Empty(t, dup, "duplicated")
	assert.Len(t, got, n)
}

// TestMirrorLinkCut: the target is stopped while the source keeps taking
// messages (the source's store is the buffer), then started again: the
// link catches up with 0 lost and 0 duplicates.
func TestMirrorLinkCut(t *testing.T) {
	src := startCluster(t, "edge", false)
	dst := startCluster(t, "central", false)
	src.createTopic("telemetry", 4)
	_, p := src.producer("cut")
	s := startMirror(t, fastLink("cut", src, dst, "telemetry"))
	before := send(t, p, "telemetry", 300, "before")
	waitFor(t, 30*time.Second, "the first messages in the target", func() bool { return len(dst.readAll("telemetry")) >= 100 })
	dst.Stop()
	waitFor(t, 30*time.Second, "the link to notice the cut", func() bool { return !s.Status()[0].Up })
	during := send(t, p, "telemetry", 500, "during")
	dst.Start()
	after := send(t, p, "telemetry", 200, "after")
	sent := append(append(before, during...), after...)
	var got []*client.MessageExt
	waitFor(t, 60*time.Second, "every message in the target", func() bool {
		got = dst.readAll("telemetry")
		lost, _ := lostAndDup(sent, got)
		return len(lost) == 0
	})
	lost, dup := lostAndDup(sent, got)
	assert.Empty(t, lost, "lost")
	assert.Empty(t, dup, "duplicated")
	assert.Len(t, got, len(sent))
	waitFor(t, 10*time.Second, "the link up again", func() bool { return s.Status()[0].Up })
	assert.GreaterOrEqual(t, s.Status()[0].Reconnects, int64(1))
}

// TestMirrorDedupReplay: a mirrored batch sent again, also after the
// target broker restarts (the window is rebuilt from the queue's tail),
// stores nothing twice and is answered with the first copy's offset;
// unmarked sends of the same id are not refused.
func TestMirrorDedupReplay(t *testing.T) {
	dst := startCluster(t, "central", false)
	dst.createTopic("replay", 1)
	cl := newClient(t, dst.Namesrv)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	batch := func(marked bool, ids ...string) int64 {
		t.Helper()
		var body []byte
		for _, id := range ids {
			p := message.Properties{message.PropertyUniqKey: id, broker.PropertyMirrorOrigin: "edge"}
			if marked {
				p[broker.PropertyMirrorDedup] = "t"
			}
			body = message.AppendBatchItem(body, message.BatchItem{Body: []byte("b-" + id), Properties: p})
		}
		_, err := cl.FetchRoute(ctx, "replay")
		require.NoError(t, err)
		addr, ok := cl.BrokerAddr("central-a")
		require.True(t, ok)
		resp, err := cl.Invoke(ctx, addr, client.NewRequest(remoting.SendBatchMessage, map[string]string{
			"a": "g", "b": "replay", "c": "TBW102", "d": "1", "e": "0", "f": "0", "g": "1", "h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true", "n": "central-a",
		}, body))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		off, err := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
		require.NoError(t, err)
		return off
	}
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("ID%02d", i)
	}
	assert.Equal(t, int64(0), batch(true, ids[:5]...))
	assert.Equal(t, int64(0), batch(true, ids[:5]...), "a replay is answered with the first copy's offset")
	assert.Equal(t, int64(2), batch(true, ids[2:8]...), "a half-new batch")
	require.Len(t, dst.readAll("replay"), 8)
	dedup := func() (windows, ids, refused string) {
		t.Helper()
		ri, err := admin.New(cl).BrokerRuntimeInfo(ctx, dst.Broker)
		require.NoError(t, err)
		return ri["quiverMirrorDedupWindows"], ri["quiverMirrorDedupIds"], ri["quiverMirrorDedupRefused"]
	}
	w, n, r := dedup()
	assert.Equal(t, []string{"1", "8", "8"}, []string{w, n, r}, "runtime info: one window of 8 ids, 5+3 copies refused")
	dst.Stop()
	dst.Start()
	assert.Equal(t, int64(0), batch(true, ids...))
	got := dst.readAll("replay")
	require.Len(t, got, 10, "after a restart, only the two new ids are stored")
	w, n, r = dedup()
	assert.Equal(t, []string{"1", "10", "8"}, []string{w, n, r}, "runtime info after the restart: the rebuilt window and the new batch's 8 copies")
	_, dup := lostAndDup(ids, got)
	assert.Empty(t, dup)
	batch(false, ids[0])
	assert.Len(t, dst.readAll("replay"), 11, "an unmarked send is not deduplicated")
}
