package broker

// VIEW_BROKER_STATS_DATA (315): one statistic's sum, tps and average per
// call over the last minute, hour and day (Java BrokerStatsData), from
// samples taken as Java's StatsItem takes them: every 10 s (7 kept, one
// minute), every 10 min (7 kept, one hour) and every hour (25 kept, one
// day). Samples are taken when the statistic is next touched or read
// rather than by a timer: the counters only change when touched, so a
// late sample holds the value it would have held on time.
//
// Kept here, keyed as Java keys them: BROKER_PUT_NUMS and BROKER_GET_NUMS
// (the cluster name), TOPIC_PUT_NUMS and TOPIC_PUT_SIZE (the topic),
// GROUP_GET_NUMS and GROUP_GET_SIZE (topic@group).

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// Statistic names (Java BrokerStatsManager).
const (
	StatsTopicPutNums  = "TOPIC_PUT_NUMS"
	StatsTopicPutSize  = "TOPIC_PUT_SIZE"
	StatsBrokerPutNums = "BROKER_PUT_NUMS"
	StatsBrokerGetNums = "BROKER_GET_NUMS"
	StatsGroupGetNums  = "GROUP_GET_NUMS"
	StatsGroupGetSize  = "GROUP_GET_SIZE"
)

// statsWindow is one of Java's sample lists.
type statsWindow struct {
	period time.Duration
	keep   int
}

var statsWindows = [3]statsWindow{{10 * time.Second, 7}, {10 * time.Minute, 7}, {time.Hour, 25}}

type statsSample struct {
	at           time.Time
	value, times int64
}

// statsItem is one statistic of one key: a running value (messages or
// bytes) and the calls that added to it, with its samples.
type statsItem struct {
	mu           sync.Mutex
	value, times int64
	samples      [3][]statsSample
	next         [3]time.Time
}

// catchUp takes the samples due by now (the value has not changed since
// the last touch, so a late sample is exact).
func (it *statsItem) catchUp(now time.Time) {
	for w, win := range statsWindows {
		if it.next[w].IsZero() {
			it.next[w] = now
		}
		if now.Sub(it.next[w]) > time.Duration(win.keep)*win.period {
			// Idle longer than the window: only the last samples matter.
			it.next[w] = now.Add(-time.Duration(win.keep) * win.period).Truncate(win.period)
		}
		for !now.Before(it.next[w]) {
			it.samples[w] = append(it.samples[w], statsSample{at: it.next[w], value: it.value, times: it.times})
			if len(it.samples[w]) > win.keep {
				it.samples[w] = it.samples[w][1:]
			}
			it.next[w] = it.next[w].Add(win.period)
		}
	}
}

func (it *statsItem) add(now time.Time, n int64) {
	it.mu.Lock()
	it.catchUp(now)
	it.value += n
	it.times++
	it.mu.Unlock()
}

// BrokerStatsItem is one window of a statistic (Java BrokerStatsItem).
type BrokerStatsItem struct {
	Sum   int64
	Tps   float64
	Avgpt float64
}

// window computes Java's StatsItem.computeStatsData over window w: the
// change between the first and last samples, per second and per call.
// Where Java divides by a zero time span (NaN, written as null) it is 0.
func (it *statsItem) window(now time.Time, w int) BrokerStatsItem {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.catchUp(now)
	s := it.samples[w]
	if len(s) == 0 {
		return BrokerStatsItem{}
	}
	first, last := s[0], s[len(s)-1]
	out := BrokerStatsItem{Sum: last.value - first.value}
	if ms := last.at.Sub(first.at).Milliseconds(); ms > 0 {
		out.Tps = float64(out.Sum) * 1000 / float64(ms)
	}
	if dt := last.times - first.times; dt > 0 {
		out.Avgpt = float64(out.Sum) / float64(dt)
	}
	return out
}

// brokerStats holds the statistics by name and key.
type brokerStats struct {
	mu    sync.RWMutex
	items map[statsKey]*statsItem
	now   func() time.Time
}

// statsKey names a statistic's item: a struct, not name+"@"+key, so that
// counting a send allocates nothing.
type statsKey struct{ name, key string }

func newBrokerStats() *brokerStats {
	return &brokerStats{items: map[statsKey]*statsItem{}, now: time.Now}
}

func (s *brokerStats) item(name, key string, create bool) *statsItem {
	k := statsKey{name, key}
	s.mu.RLock()
	it := s.items[k]
	s.mu.RUnlock()
	if it != nil || !create {
		return it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if it = s.items[k]; it == nil {
		it = &statsItem{}
		s.items[k] = it
	}
	return it
}

func (s *brokerStats) add(name, key string, n int64) {
	s.item(name, key, true).add(s.now(), n)
}

// observeStored counts a stored batch by topic and for the broker.
func (b *Broker) observeStoredStats(msgs []*message.Ext, pos []store.Position) {
	s := b.stats
	s.add(StatsBrokerPutNums, b.cfg.Cluster, int64(len(msgs)))
	for i := 0; i < len(msgs); {
		j, bytes := i, int64(0)
		for ; j < len(msgs) && msgs[j].Topic == msgs[i].Topic; j++ {
			bytes += int64(pos[j].Size)
		}
		s.add(StatsTopicPutNums, msgs[i].Topic, int64(j-i))
		s.add(StatsTopicPutSize, msgs[i].Topic, bytes)
		i = j
	}
}

func (b *Broker) observePulledStats(topic string, msgs, bytes int) {
	b.stats.add(StatsBrokerGetNums, b.cfg.Cluster, int64(msgs))
}

// observeGroupGet counts a pull's messages for its group (pull.go).
func (b *Broker) observeGroupGet(topic, group string, msgs, bytes int) {
	if b.stats == nil || msgs == 0 {
		return
	}
	key := topic + "@" + group
	b.stats.add(StatsGroupGetNums, key, int64(msgs))
	b.stats.add(StatsGroupGetSize, key, int64(bytes))
}

// groupGetTps is Java's BrokerStatsManager.tpsGroupGetNums: the messages
// per second group pulled from topic over the last minute.
func (b *Broker) groupGetTps(topic, group string) float64 {
	it := b.stats.item(StatsGroupGetNums, topic+"@"+group, false)
	if it == nil {
		return 0
	}
	return it.window(b.stats.now(), 0).Tps
}

// BrokerStatsData returns a statistic's minute, hour and day windows; ok
// is false when it was never counted.
func (b *Broker) BrokerStatsData(name, key string) (minute, hour, day BrokerStatsItem, ok bool) {
	it := b.stats.item(name, key, false)
	if it == nil {
		return minute, hour, day, false
	}
	now := b.stats.now()
	return it.window(now, 0), it.window(now, 1), it.window(now, 2), true
}

// javaDouble formats f as Java's Double.toString (fastjson writes doubles
// so): "0.0", "1.5", "1.2345E7".
func javaDouble(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	a := math.Abs(f)
	if f == 0 || (a >= 1e-3 && a < 1e7) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64)
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

func writeStatsItem(sb *strings.Builder, it BrokerStatsItem) {
	fmt.Fprintf(sb, `{"avgpt":%s,"sum":%d,"tps":%s}`, javaDouble(it.Avgpt), it.Sum, javaDouble(it.Tps))
}

func (b *Broker) handleViewBrokerStatsData(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	name, key := e.String("statsName"), e.String("statsKey")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	minute, hour, day, ok := b.BrokerStatsData(name, key)
	if !ok {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("The stats <%s> <%s> not exist", name, key))
	}
	var sb strings.Builder
	sb.WriteString(`{"statsDay":`)
	writeStatsItem(&sb, day)
	sb.WriteString(`,"statsHour":`)
	writeStatsItem(&sb, hour)
	sb.WriteString(`,"statsMinute":`)
	writeStatsItem(&sb, minute)
	sb.WriteString(`}`)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(sb.String())
	return resp
}
