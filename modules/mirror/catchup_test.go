package mirror_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/modules/mirror"
)

// TestMirrorCatchUpOrder: the target is cut off (stopped) while the
// source takes a backlog, then comes back; messages sent after it is back
// ("live") are mirrored while the link, rate-limited so that the backlog
// takes seconds, still writes the backlog. With catch_up newest_first the
// live messages are stored in the target before the backlog is complete
// (in each target queue a live message precedes backlog messages, and the
// link showed its gap); with oldest_first (the control) every backlog
// message precedes every live one. Either way the final content is exact:
// 0 lost, 0 duplicates. An ordered (FIFO) topic of the newest-first link
// keeps its per-queue order.
func TestMirrorCatchUpOrder(t *testing.T) {
	for _, mode := range []string{mirror.CatchUpNewestFirst, mirror.CatchUpOldestFirst} {
		t.Run(mode, func(t *testing.T) { testCatchUpOrder(t, mode) })
	}
}

func testCatchUpOrder(t *testing.T, mode string) {
	src := startCluster(t, "edge", false)
	dst := startCluster(t, "central", false)
	src.createTopic("feed", 2)
	createFIFOTopic(t, src, "ordered", 2)
	_, p := src.producer("catchup")
	lk := fastLink("catchup", src, dst, "feed", "ordered")
	lk.CatchUp = mode
	lk.BatchSize = 16 // a gap opens past 4 batches (64 messages) behind
	lk.RateLimit = 300
	s := startMirror(t, lk)

	before := send(t, p, "feed", 40, "before")
	beforeOrd := send(t, p, "ordered", 40, "ordered-before")
	waitFor(t, 30*time.Second, "the first messages in the target", func() bool {
		return len(dst.readAll("feed")) == 40 && len(dst.readAll("ordered")) == 40
	})
	dst.Stop()
	waitFor(t, 30*time.Second, "the link to notice the cut", func() bool { return !s.Status()[0].Up })
	backlog := send(t, p, "feed", 1000, "backlog")
	backlogOrd := send(t, p, "ordered", 300, "ordered-backlog")
	dst.Start()
	waitFor(t, 30*time.Second, "the link up again", func() bool { return s.Status()[0].Up })
	live := send(t, p, "feed", 40, "live")

	sawGap := false
	waitFor(t, 60*time.Second, "the live messages in the target", func() bool {
		for _, q := range s.Status()[0].Queues {
			sawGap = sawGap || q.GapMessages > 0
		}
		lost, _ := lostAndDup(live, dst.readAll("feed"))
		return len(lost) == 0
	})

	sent := append(append(before, backlog...), live...)
	sentOrd := append(append([]string(nil), beforeOrd...), backlogOrd...)
	var got, gotOrd []*client.MessageExt
	waitFor(t, 90*time.Second, "every message in the target", func() bool {
		got, gotOrd = dst.readAll("feed"), dst.readAll("ordered")
		lost, _ := lostAndDup(sent, got)
		lostOrd, _ := lostAndDup(sentOrd, gotOrd)
		return len(lost) == 0 && len(lostOrd) == 0
	})
	lost, dup := lostAndDup(sent, got)
	assert.Empty(t, lost, "lost")
	assert.Empty(t, dup, "duplicated")
	assert.Len(t, got, len(sent))
	lost, dup = lostAndDup(sentOrd, gotOrd)
	assert.Empty(t, lost, "lost (ordered)")
	assert.Empty(t, dup, "duplicated (ordered)")

	// Per target queue: the first live message's offset against the last
	// backlog message's.
	firstLive, lastBacklog := map[int]int64{}, map[int]int64{}
	for _, m := range got {
		q := m.Queue.QueueID
		switch b := string(m.Body); {
		case strings.HasPrefix(b, "live-"):
			if o, ok := firstLive[q]; !ok || m.QueueOffset < o {
				firstLive[q] = m.QueueOffset
			}
		case strings.HasPrefix(b, "backlog-"):
			lastBacklog[q] = max(lastBacklog[q], m.QueueOffset)
		}
	}
	require.Len(t, firstLive, 2, "live messages in both target queues")
	for q, fl := range firstLive {
		if mode == mirror.CatchUpNewestFirst {
			assert.Less(t, fl, lastBacklog[q], "target queue %d: a live message is stored before the backlog is complete", q)
		} else {
			assert.Greater(t, fl, lastBacklog[q], "target queue %d: oldest first stores the backlog first", q)
		}
	}
	assert.Equal(t, mode == mirror.CatchUpNewestFirst, sawGap, "the link's status shows a gap behind the live tail")

	// The ordered topic: each target queue holds its source queue's
	// messages in the source's order.
	srcOrd := src.readAll("ordered")
	assert.Equal(t, bodiesByQueue(srcOrd), bodiesByQueue(gotOrd), "ordered topic: per-queue order")
	for _, q := range s.Status()[0].Queues {
		assert.Zero(t, q.LagMessages, "lag of %s:%d at the end", q.Topic, q.Queue)
	}
}

func createFIFOTopic(t *testing.T, c *cluster, topic string, queues int) {
	t.Helper()
	cl := newClient(t, c.Namesrv)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, admin.New(cl).CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: queues, WriteQueueNums: queues,
		Attributes: "+message.type=FIFO"}))
	waitFor(t, 10*time.Second, "topic "+topic+" routed", func() bool {
		r, err := cl.FetchRoute(ctx, topic)
		return err == nil && len(r.Publish) == queues
	})
}

// bodiesByQueue lists the bodies of msgs per queue id, in queue order.
func bodiesByQueue(msgs []*client.MessageExt) map[int][]string {
	sorted := append([]*client.MessageExt(nil), msgs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].QueueOffset < sorted[j].QueueOffset })
	out := map[int][]string{}
	for _, m := range sorted {
		out[m.Queue.QueueID] = append(out[m.Queue.QueueID], fmt.Sprint(string(m.Body)))
	}
	return out
}
