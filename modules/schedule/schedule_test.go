package schedule

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

func TestParseLevels(t *testing.T) {
	tests := []struct {
		give string
		want []time.Duration
		err  bool
	}{
		{give: DefaultDelayLevels, want: []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
			time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 7 * time.Minute,
			8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}},
		{give: "1s 2s 3s", want: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
		{give: " 250ms,1.5s\t1d ", want: []time.Duration{250 * time.Millisecond, 1500 * time.Millisecond, 24 * time.Hour}},
		{give: "", err: true},
		{give: "1s x", err: true},
		{give: "1s 0s", err: true},
		{give: "-1s", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := ParseLevels(tt.give)
			if tt.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	c := NewConfig()
	require.NoError(t, c.Validate())
	assert.Len(t, c.Levels(), 18)
	c.DelayLevels = "nope"
	c.MaxDelay = 0
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "schedule.delay_levels")
	assert.Contains(t, err.Error(), "schedule.max_delay")
}

func TestClampLevel(t *testing.T) {
	tests := []struct{ give, n, want int }{{0, 18, 0}, {-3, 18, 0}, {1, 18, 1}, {18, 18, 18}, {19, 18, 18}, {99, 3, 3}}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ClampLevel(tt.give, tt.n), "level %d of %d", tt.give, tt.n)
	}
}

func TestDueMs(t *testing.T) {
	assert.Equal(t, int64(1_005_000), DueMs(1_000_000, 5*time.Second))
	assert.Equal(t, int64(1_000_250), DueMs(1_000_000, 250*time.Millisecond))
}

func TestDeliverTime(t *testing.T) {
	const now = 1_000_000
	tests := []struct {
		name   string
		give   message.Properties
		want   int64
		ok     bool
		reject bool
	}{
		{name: "none", give: message.Properties{"DELAY": "3"}},
		{name: "start deliver time", give: message.Properties{message.PropertyStartDeliverTime: "1500000"}, want: 1_500_000, ok: true},
		{name: "timer deliver ms", give: message.Properties{message.PropertyTimerDeliverMS: "1200000"}, want: 1_200_000, ok: true},
		{name: "timer delay ms", give: message.Properties{message.PropertyTimerDelayMS: "2500"}, want: 1_002_500, ok: true},
		{name: "garbage", give: message.Properties{message.PropertyTimerDelayMS: "soon"}, ok: true, reject: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := deliverTime(tt.give, now)
			assert.Equal(t, tt.ok, ok)
			if tt.reject {
				var re *broker.RejectError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, remoting.MessageIllegal, re.Code)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func shortConfig() *Config {
	c := NewConfig()
	c.DelayLevels = "200ms 400ms 600ms"
	return c
}

// TestDelayLevelDelivery checks the rewrite into SCHEDULE_TOPIC_XXXX, the
// delivery after the level's delay with the real topic and queue restored,
// clamping, and order within a level.
func TestDelayLevelDelivery(t *testing.T) {
	n := startNode(t, t.TempDir(), shortConfig())
	sent := time.Now().UnixMilli()
	n.put("T", message.Properties{"DELAY": "2", "UNIQ_KEY": "u1", "color": "blue"}, "two")
	n.put("T", message.Properties{"DELAY": "9"}, "clamped")
	for i := 0; i < 5; i++ {
		n.put("T", message.Properties{"DELAY": "1"}, "one-"+strconv.Itoa(i))
	}
	held := n.read(protocol.ScheduleTopic) // queue 0 = level 1
	require.Len(t, held, 5)
	assert.Equal(t, "T", held[0].props[message.PropertyRealTopic])
	assert.Equal(t, "0", held[0].props[message.PropertyRealQueueID])

	got := n.waitCount("T", 7, 5*time.Second)
	byBody := map[string]received{}
	var ones []string
	for _, r := range got {
		byBody[r.body] = r
		if len(r.body) > 4 && r.body[:4] == "one-" {
			ones = append(ones, r.body)
		}
	}
	assert.Equal(t, []string{"one-0", "one-1", "one-2", "one-3", "one-4"}, ones, "in order within a level")
	two := byBody["two"]
	assert.GreaterOrEqual(t, two.storeMs-sent, int64(400))
	assert.Less(t, two.storeMs-sent, int64(400+300))
	assert.Equal(t, "u1", two.props["UNIQ_KEY"])
	assert.Equal(t, "blue", two.props["color"])
	// Java's messageTimeUp stores the held properties string unchanged:
	// the consumer's getDelayTimeLevel() is the level.
	assert.Equal(t, "2", two.props[message.PropertyDelayTimeLevel])
	assert.Equal(t, "T", two.props[message.PropertyRealTopic])
	assert.Equal(t, "0", two.props[message.PropertyRealQueueID])
	assert.NotContains(t, two.props, message.PropertyTimerDequeue, "the wheel's properties only on timer messages")
	assert.GreaterOrEqual(t, byBody["clamped"].storeMs-sent, int64(600), "level 9 clamps to level 3")
}

// TestLevelProgressSurvivesRestart delivers, restarts, and checks nothing
// is delivered twice and a pending message still arrives.
func TestLevelProgressSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	var shift atomic.Int64 // added to the service's clock
	c := shortConfig()
	// "late" must still be pending when the restarted broker answers
	// GET_ALL_DELAY_OFFSET: its level is an hour, and it comes due when
	// the service's clock is moved past it, not after the 2 s that the
	// put, the restart and the query (up to half a second under -race on
	// a busy machine) had to fit in.
	c.DelayLevels = "200ms 400ms 1h"
	c.now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	n := startNode(t, dir, c)
	n.put("T", message.Properties{"DELAY": "1"}, "early")
	n.waitCount("T", 1, 5*time.Second)
	n.put("T", message.Properties{"DELAY": "3"}, "late")
	n = n.restart()
	assert.Equal(t, int64(1), n.s.Progress()[1], "level 1 progress persisted")
	resp := n.b.Router().Handle(t.Context(), nil, remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil))
	require.Equal(t, remoting.Success, resp.Code)
	assert.JSONEq(t, `{"offsetTable":{"1":1,"2":0,"3":0}}`, string(resp.Body))
	// The level waits for its head with a timer, deaf to wakes, so late
	// is delivered within maxSleep of the clock's move (as after a jump
	// of the system clock).
	shift.Store(int64(time.Hour))
	n.waitCount("T", 2, maxSleep+5*time.Second)
	time.Sleep(800 * time.Millisecond)
	got := n.read("T")
	require.Len(t, got, 2)
	assert.Equal(t, "early", got[0].body)
	assert.Equal(t, "late", got[1].body)
}

// TestTimers checks each timer property, delivery at the time, restart with
// pending timers, and the max_delay refusal.
func TestTimers(t *testing.T) {
	dir := t.TempDir()
	c := shortConfig()
	c.MaxDelay = time.Hour
	n := startNode(t, dir, c)
	now := time.Now().UnixMilli()
	n.put("T", message.Properties{message.PropertyStartDeliverTime: strconv.FormatInt(now+300, 10)}, "abs")
	n.put("T", message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(now+200, 10)}, "deliver-ms")
	n.put("T", message.Properties{message.PropertyTimerDelayMS: "1500"}, "rel")
	n.put("T", message.Properties{message.PropertyTimerDelayMS: "0"}, "now")
	held := n.read(broker.TimerTopic)
	require.Len(t, held, 3)

	m := &message.Ext{Message: message.Message{Topic: "T", Properties: message.Properties{message.PropertyTimerDelayMS: strconv.Itoa(int(2 * time.Hour / time.Millisecond))}}}
	_, err := n.b.Put(t.Context(), []*message.Ext{m})
	var re *broker.RejectError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, remoting.MessageIllegal, re.Code)
	assert.True(t, errors.Is(err, broker.ErrRejected))

	got := n.waitCount("T", 3, 5*time.Second)
	assert.Equal(t, "now", got[0].body)
	assert.Equal(t, "deliver-ms", got[1].body)
	assert.GreaterOrEqual(t, got[1].storeMs, now+200)
	assert.Less(t, got[1].storeMs, now+200+250)
	assert.Equal(t, "abs", got[2].body)
	assert.GreaterOrEqual(t, got[2].storeMs, now+300)
	// As Java's TimerMessageStore.convert: the stored properties kept, the
	// wheel's enqueue and dequeue times added.
	assert.Equal(t, strconv.FormatInt(now+300, 10), got[2].props[message.PropertyStartDeliverTime])
	assert.Equal(t, strconv.FormatInt(now+300, 10), got[2].props[message.PropertyTimerOut])
	assert.Equal(t, "T", got[2].props[message.PropertyRealTopic])
	assert.Equal(t, strconv.FormatInt(now+200, 10), got[1].props[message.PropertyTimerDeliverMS], "RocketMQ 5's delivery_timestamp")
	deq, err := strconv.ParseInt(got[1].props[message.PropertyTimerDequeue], 10, 64)
	require.NoError(t, err)
	enq, err := strconv.ParseInt(got[1].props[message.PropertyTimerEnqueue], 10, 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, enq, deq)
	assert.GreaterOrEqual(t, deq, now+200)

	n = n.restart()
	got = n.waitCount("T", 4, 5*time.Second)
	assert.Equal(t, "rel", got[3].body)
	assert.GreaterOrEqual(t, got[3].storeMs, now+1500)
	time.Sleep(300 * time.Millisecond)
	assert.Len(t, n.read("T"), 4, "nothing delivered twice")
}

// TestTimersAcrossSlotsAndRestart spreads timers over many small wheel
// slots, restarts in the middle, and checks each is delivered once, not
// early, and that delivered slots' files are dropped.
func TestTimersAcrossSlotsAndRestart(t *testing.T) {
	dir := t.TempDir()
	c := shortConfig()
	c.wheelSlot = 100 * time.Millisecond
	n := startNode(t, dir, c)
	now := time.Now().UnixMilli()
	const count = 60
	due := map[string]int64{}
	for i := 0; i < count; i++ {
		at := now + 300 + int64((i*37)%count)*25 // 300ms .. 1.8s, shuffled
		b := "t" + strconv.Itoa(i)
		due[b] = at
		n.put("T", message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(at, 10)}, b)
	}
	time.Sleep(900 * time.Millisecond)
	n = n.restart()
	n.waitCount("T", count, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	got := n.read("T")
	require.Len(t, got, count, "each delivered once")
	seen := map[string]bool{}
	for _, r := range got {
		assert.False(t, seen[r.body], "%s twice", r.body)
		seen[r.body] = true
		assert.GreaterOrEqual(t, r.storeMs, due[r.body], "%s early", r.body)
	}
	require.Eventually(t, func() bool {
		files, _ := os.ReadDir(filepath.Join(dir, "timerwheel"))
		return len(files) <= 1
	}, 3*time.Second, 20*time.Millisecond, "delivered slot files dropped")
}

// TestApplyMasterProgressJavaBody: a slave takes the delay progress of a
// Java master, whose fastjson body has unquoted integer keys, as well as
// a Quiver master's; progress is capped at the records the slave holds,
// and a malformed body is an error that keeps the progress.
func TestApplyMasterProgressJavaBody(t *testing.T) {
	c := NewConfig()
	c.DelayLevels = "1h 2h"
	n := startNode(t, t.TempDir(), c)
	for i := range 3 {
		n.put("T", message.Properties{"DELAY": "1", "UNIQ_KEY": "d" + strconv.Itoa(i)}, "held")
	}
	master := n.b.Role()
	n.b.SetRole(broker.RoleState{Role: broker.RoleSlave, ID: 1})
	defer n.b.SetRole(master)

	require.NoError(t, n.s.applyMasterProgress([]byte(`{"offsetTable":{1:2,2:0}}`)), "Java's fastjson shape")
	assert.Equal(t, int64(2), n.s.Progress()[1])
	require.NoError(t, n.s.applyMasterProgress([]byte(`{"offsetTable":{"1":9,"2":0}}`)), "standard JSON")
	assert.Equal(t, int64(3), n.s.Progress()[1], "capped at the 3 records this broker holds")
	assert.Error(t, n.s.applyMasterProgress([]byte(`{"offsetTable":{1:`)), "a torn body")
	assert.Equal(t, int64(3), n.s.Progress()[1], "progress kept")
}

// slowDelivery makes the Put that delivers the message with body slow by
// d, as a store write or an fsync can be under load.
func (n *node) slowDelivery(body string, d time.Duration) {
	n.b.AddPutHook(func(ctx context.Context, m *message.Ext) (int64, bool, error) {
		if ctx.Value(releasingKey{}) != nil && string(m.Body) == body {
			time.Sleep(d)
		}
		return 0, false, nil
	})
}

// TestWaitCountsFromAfterSlowDelivery: the wait for the next message of a
// level, and for the next timer, counts from when the slow delivery before
// it ended, not from before it: they used to be delivered as late as that
// delivery took.
func TestWaitCountsFromAfterSlowDelivery(t *testing.T) {
	const slow = 700 * time.Millisecond
	t.Run("level", func(t *testing.T) {
		c := NewConfig()
		c.DelayLevels = "1s"
		n := startNode(t, t.TempDir(), c)
		n.slowDelivery("first", slow)
		n.put("T", message.Properties{"DELAY": "1"}, "first")
		time.Sleep(800 * time.Millisecond) // "second" is read with "first", and due 100 ms after its slow delivery ends
		second := n.putExt("T", message.Properties{"DELAY": "1"}, "second")
		got := n.waitCount("T", 2, 10*time.Second)
		require.Equal(t, "second", got[1].body)
		assert.Less(t, got[1].storeMs-(second.StoreTimestamp+1000), (slow / 2).Milliseconds(), "late by the slow delivery before it")
	})
	t.Run("timer", func(t *testing.T) {
		// The wheel runs on the service's clock (Config.now), which the
		// slow delivery moves on by jump instead of taking that long: a
		// wait counted from before it would deliver "second", due 100 ms
		// before it ends, jump late, and one counted from after it
		// delivers at once. A busy machine delays a delivery by some
		// milliseconds, far from the jump/2 allowed, where 350 ms of
		// the wall clock were allowed before.
		const jump = 4 * time.Second // below maxSleep, which caps any wait
		var shift atomic.Int64
		c := shortConfig()
		c.now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
		n := startNode(t, t.TempDir(), c)
		n.b.AddPutHook(func(ctx context.Context, m *message.Ext) (int64, bool, error) {
			if ctx.Value(releasingKey{}) != nil && string(m.Body) == "first" {
				shift.Add(int64(jump))
			}
			return 0, false, nil
		})
		now := c.now().UnixMilli()
		second := now + 300 + jump.Milliseconds() - 100
		n.put("T", message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(now+300, 10)}, "first")
		n.put("T", message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(second, 10)}, "second")
		got := n.waitCount("T", 2, 10*time.Second)
		require.Equal(t, "second", got[1].body)
		deq, err := strconv.ParseInt(got[1].props[message.PropertyTimerDequeue], 10, 64)
		require.NoError(t, err)
		assert.Less(t, deq-second, (jump / 2).Milliseconds(), "late by the slow delivery before it (by the service's clock)")
	})
}
