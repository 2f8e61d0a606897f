package mirror_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/modules/mirror"
)

// TestMirrorConsumerFailover: a group consumes part of a topic in the
// source; the link translates its committed offsets into the target; the
// source goes away and the group continues in the target from the
// translated offsets: nothing it had not consumed is skipped, and what it
// sees again is at most one batch per queue (well within one checkpoint
// interval's messages).
func TestMirrorConsumerFailover(t *testing.T) {
	src := startCluster(t, "dc1", false)
	dst := startCluster(t, "dc2", false)
	src.createTopic("payments", 2)
	_, p := src.producer("fo")
	sent := send(t, p, "payments", 400, "pay")
	l := fastLink("fo", src, dst, "payments")
	l.Groups = []string{"billing"}
	l.BatchSize = 16
	startMirror(t, l)
	waitFor(t, 30*time.Second, "the topic in the target", func() bool { return len(dst.readAll("payments")) == len(sent) })

	// The group consumed the first 120 messages of each source queue.
	scl := newClient(t, src.Namesrv)
	defer scl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc, err := consumer.NewPull(scl, "billing")
	require.NoError(t, err)
	qs, err := sc.Queues(ctx, "payments")
	require.NoError(t, err)
	consumed := map[string]bool{}
	const done = 120
	for _, mq := range qs {
		res, err := sc.Pull(ctx, mq, consumer.All(), 0, done)
		require.NoError(t, err)
		require.Len(t, res.Messages, done)
		for _, m := range res.Messages {
			consumed[m.MsgID] = true
		}
		require.NoError(t, sc.CommitOffset(ctx, mq, done))
	}
	// The translated offsets reach the target.
	dcl := newClient(t, dst.Namesrv)
	defer dcl.Close()
	dc, err := consumer.NewPull(dcl, "billing")
	require.NoError(t, err)
	dqs, err := dc.Queues(ctx, "payments")
	require.NoError(t, err)
	require.Len(t, dqs, 2)
	waitFor(t, 30*time.Second, "translated offsets in the target", func() bool {
		for _, mq := range dqs {
			if off, err := dc.CommittedOffset(ctx, mq); err != nil || off <= 0 {
				return false
			}
		}
		return true
	})
	src.Stop()

	// The group continues in the target.
	var again, skipped int
	seen := map[string]bool{}
	for _, mq := range dqs {
		off, err := dc.CommittedOffset(ctx, mq)
		require.NoError(t, err)
		assert.LessOrEqual(t, off, int64(done), "never ahead of the source position")
		assert.GreaterOrEqual(t, off, int64(done-l.BatchSize), "duplicates bounded by one batch")
		maxOff, err := dc.MaxOffset(ctx, mq)
		require.NoError(t, err)
		for off < maxOff {
			res, err := dc.Pull(ctx, mq, consumer.All(), off, 64)
			require.NoError(t, err)
			for _, m := range res.Messages {
				seen[m.MsgID] = true
				if consumed[m.MsgID] {
					again++
				}
			}
			off = res.NextBeginOffset
		}
	}
	for _, id := range sent {
		if !consumed[id] && !seen[id] {
			skipped++
		}
	}
	assert.Zero(t, skipped, "messages the group never got")
	assert.LessOrEqual(t, again, 2*l.BatchSize, "messages the group got twice")
	t.Logf("failover: %d consumed in the source, %d again in the target, %d skipped", len(consumed), again, skipped)
}

// TestMirrorActiveActive: links in both directions between two clusters
// that both take writes: every message ends up once in each cluster, and
// none goes back to where it came from.
func TestMirrorActiveActive(t *testing.T) {
	a := startCluster(t, "alpha", false)
	b := startCluster(t, "beta", false)
	a.createTopic("shared", 2)
	b.createTopic("shared", 2)
	_, pa := a.producer("aa")
	_, pb := b.producer("bb")
	ab := startMirror(t, fastLink("ab", a, b, "shared"))
	ba := startMirror(t, fastLink("ba", b, a, "shared"))
	fromA := send(t, pa, "shared", 150, "a")
	fromB := send(t, pb, "shared", 150, "b")
	all := append(append([]string(nil), fromA...), fromB...)
	for _, c := range []*cluster{a, b} {
		var got []*client.MessageExt
		waitFor(t, 30*time.Second, "every message in "+c.name, func() bool {
			got = c.readAll("shared")
			lost, _ := lostAndDup(all, got)
			return len(lost) == 0
		})
		_, dup := lostAndDup(all, got)
		assert.Empty(t, dup, "duplicates in %s", c.name)
		assert.Len(t, got, len(all), c.name)
	}
	// Each link saw the other's copies and left them out.
	waitFor(t, 10*time.Second, "loop skips counted", func() bool {
		return ab.Status()[0].LoopSkipped >= int64(len(fromB)) && ba.Status()[0].LoopSkipped >= int64(len(fromA))
	})
	// Both links caught up with everything (a looping copy would have
	// been written by now): still each message once.
	waitFor(t, 10*time.Second, "both links caught up", func() bool {
		for _, s := range []*mirror.Service{ab, ba} {
			for _, q := range s.Status()[0].Queues {
				if q.LagMessages > 0 || q.MaxOffset == 0 {
					return false
				}
			}
		}
		return true
	})
	assert.Len(t, a.readAll("shared"), len(all))
	assert.Len(t, b.readAll("shared"), len(all))
}

// TestMirrorQUIC: a link whose clusters are reached over QUIC.
func TestMirrorQUIC(t *testing.T) {
	src := startCluster(t, "edgeq", true)
	dst := startCluster(t, "centralq", true)
	src.createTopic("sensors", 2)
	_, p := src.producer("q")
	sent := send(t, p, "sensors", 300, "q")
	l := mirror.Link{Name: "quic", Source: mirror.Cluster{Namesrv: []string{src.QUIC}}, Target: mirror.Cluster{Namesrv: []string{dst.QUIC}},
		Topics: []string{"sensors"}, CheckpointInterval: 100 * time.Millisecond, RefreshInterval: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, CreateTopics: true}
	s := startMirror(t, l)
	var got []*client.MessageExt
	waitFor(t, 60*time.Second, "every message in the target", func() bool {
		got = dst.readAll("sensors")
		lost, _ := lostAndDup(sent, got)
		return len(lost) == 0
	})
	// Kill-free restart over QUIC: stop, send more, start again.
	stopMirror(t, s)
	more := send(t, p, "sensors", 100, "q2")
	startMirror(t, l)
	all := append(append([]string(nil), sent...), more...)
	waitFor(t, 60*time.Second, "the rest in the target", func() bool {
		got = dst.readAll("sensors")
		lost, _ := lostAndDup(all, got)
		return len(lost) == 0
	})
	lost, dup := lostAndDup(all, got)
	assert.Empty(t, lost)
	assert.Empty(t, dup)
}

// TestMirrorPatternAndFilter: topics found by pattern (also one created
// after the link started), a SQL92 filter evaluated by the source, and
// a rate limit: only the matching messages arrive, the link is not left
// behind by those it filtered out.
func TestMirrorPatternAndFilter(t *testing.T) {
	src := startCluster(t, "east", false)
	dst := startCluster(t, "west", false)
	src.createTopic("flt-a", 2)
	src.createTopic("other", 2)
	_, p := src.producer("flt")
	l := fastLink("flt", src, dst)
	l.TopicPattern = "flt-.*"
	l.Filter = mirror.Filter{Type: "SQL92", Expression: "n >= 5"}
	l.RateLimit = 2000
	s := startMirror(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sendN := func(topic string) (want []string) {
		for i := 0; i < 20; i++ {
			m := client.NewMessage(topic, []byte("x"))
			m.SetProperty("n", strconv.Itoa(i%10))
			r, err := p.SendSync(ctx, m)
			require.NoError(t, err)
			if i%10 >= 5 {
				want = append(want, r.MsgID)
			}
		}
		return want
	}
	wantA := sendN("flt-a")
	sendN("other")
	src.createTopic("flt-b", 1) // after the link started: found at the next refresh
	wantB := sendN("flt-b")
	for topic, want := range map[string][]string{"flt-a": wantA, "flt-b": wantB} {
		var got []*client.MessageExt
		waitFor(t, 30*time.Second, "the matching messages of "+topic, func() bool {
			got = dst.readAll(topic)
			lost, _ := lostAndDup(want, got)
			return len(lost) == 0
		})
		assert.Len(t, got, len(want), "only matching messages of %s", topic)
	}
	assert.Empty(t, dst.readAll("other"), "a topic the pattern does not match")
	waitFor(t, 10*time.Second, "no lag left", func() bool {
		qs := s.Status()[0].Queues
		for _, q := range qs {
			if q.LagMessages > 0 {
				return false
			}
		}
		return len(qs) == 3
	})
}
