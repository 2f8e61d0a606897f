package broker

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func TestJavaDouble(t *testing.T) {
	tests := []struct {
		give float64
		want string
	}{
		{0, "0.0"}, {1.5, "1.5"}, {2, "2.0"}, {0.1, "0.1"}, {12345678, "1.2345678E7"}, {1e-4, "1.0E-4"}, {-3, "-3.0"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, javaDouble(tt.give), "%v", tt.give)
	}
}

// The windows follow Java's StatsItem: samples every 10 s (minute), 10 min
// (hour) and hour (day); sum, tps and average per call between the first
// and last sample.
func TestStatsItemWindows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var it statsItem
	it.add(t0, 10)                            // sample at t0 holds 0
	it.add(t0.Add(5*time.Second), 20)         // no sample due
	it.add(t0.Add(25*time.Second), 30)        // samples at 10 s and 20 s hold 30 (2 calls)
	w := it.window(t0.Add(30*time.Second), 0) // sample at 30 s holds 60 (3 calls)
	assert.Equal(t, BrokerStatsItem{Sum: 60, Tps: 2, Avgpt: 20}, w)
	// Only the last 7 samples (one minute) count.
	w = it.window(t0.Add(80*time.Second), 0)
	assert.Equal(t, BrokerStatsItem{Sum: 30, Tps: 0.5, Avgpt: 30}, w, "samples from 20 s to 80 s: the 30 added before 20 s is out")
	assert.Equal(t, BrokerStatsItem{}, it.window(t0.Add(90*time.Second), 0), "nothing added from 30 s to 90 s")
	assert.Equal(t, BrokerStatsItem{}, it.window(t0.Add(90*time.Second), 1), "one hour-sample so far")
	// Idle for a day: every window is flat.
	assert.Equal(t, BrokerStatsItem{}, it.window(t0.Add(48*time.Hour), 2))
	assert.Len(t, it.samples[2], 25)
}

type statsFakeClock struct{ ns atomic.Int64 }

func (c *statsFakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *statsFakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestViewBrokerStatsData(t *testing.T) {
	clock := &statsFakeClock{}
	clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	h := startBroker(t, t.TempDir(), nil)
	// Set before the first request: the request's write and the broker's
	// read of it order this write before every use.
	h.b.stats.now = clock.now

	resp := h.invoke(remoting.ViewBrokerStatsData, map[string]string{"statsName": StatsTopicPutNums, "statsKey": "VS"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "The stats <TOPIC_PUT_NUMS> <VS> not exist", resp.Remark)

	require.Equal(t, remoting.Success, h.send("VS", 0, "first", nil).Code)
	clock.advance(10 * time.Second)
	for i := 0; i < 4; i++ {
		require.Equal(t, remoting.Success, h.send("VS", 0, fmt.Sprint(i), nil).Code)
	}
	clock.advance(10 * time.Second)
	resp = h.invoke(remoting.ViewBrokerStatsData, map[string]string{"statsName": StatsTopicPutNums, "statsKey": "VS"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":0.0,"sum":0,"tps":0.0},"statsMinute":{"avgpt":1.0,"sum":5,"tps":0.25}}`, string(resp.Body))

	resp = h.invoke(remoting.ViewBrokerStatsData, map[string]string{"statsName": StatsBrokerPutNums, "statsKey": protocol.DefaultCluster}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), `"statsMinute":{"avgpt":1.0,"sum":5,"tps":0.25}`)
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "VG", "VS", "*")).Code)
	require.Equal(t, remoting.Success, h.invoke(remoting.PullMessage, pullExt("VG", "VS", 0, 0, 0, 0), nil).Code)
	clock.advance(10 * time.Second)
	resp = h.invoke(remoting.ViewBrokerStatsData, map[string]string{"statsName": StatsGroupGetNums, "statsKey": "VS@VG"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), `"statsMinute":{"avgpt":5.0,"sum":5,"tps":0.5}`)
	resp = h.invoke(remoting.ViewBrokerStatsData, map[string]string{"statsName": StatsBrokerGetNums, "statsKey": protocol.DefaultCluster}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), `"sum":5`)

	resp = h.invoke(remoting.ViewBrokerStatsData, map[string]string{"statsName": StatsTopicPutNums}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "statsKey")
}
