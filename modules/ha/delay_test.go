package ha

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/schedule"
)

// startSchedule runs the delay service on n's broker until the test ends.
func startSchedule(t *testing.T, n *node) *schedule.Service {
	t.Helper()
	cfg := schedule.NewConfig()
	cfg.DelayLevels = "100ms 1h"
	svc, err := schedule.New(cfg, n.b)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, svc.Stop(context.Background())) })
	return svc
}

// sendProps sends body to queue 0 of topic with SEND_MESSAGE and the
// given properties, and requires SUCCESS.
func sendProps(ctx context.Context, t *testing.T, c *remoting.Client, addr, topic, body string, props message.Properties) *remoting.Command {
	t.Helper()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": props.Encode(),
		"reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}, []byte(body)))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	return resp
}

// TestSlaveCopiesDelayProgress: a slave takes its master's delay progress
// (GET_ALL_DELAY_OFFSET) and delivers nothing itself; progress the master
// reports beyond what the slave's schedule queue holds is capped there.
func TestSlaveCopiesDelayProgress(t *testing.T) {
	m, s := masterSlave(t, broker.RoleAsyncMaster)
	msvc, ssvc := startSchedule(t, m), startSchedule(t, s)
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		sendProps(ctx, t, c, m.addr, "Delayed", "delayed",
			message.Properties{"UNIQ_KEY": "d" + strconv.Itoa(i), message.PropertyDelayTimeLevel: "1"})
	}
	require.Eventually(t, func() bool { return msvc.Progress()[1] == 3 }, 10*time.Second, 20*time.Millisecond,
		"the master delivers the level-1 messages")
	require.Eventually(t, func() bool { return ssvc.Progress()[1] == 3 }, 10*time.Second, 20*time.Millisecond,
		"the slave takes the master's progress")
	assert.Equal(t, int64(0), ssvc.Progress()[2])
	// The slave delivered nothing: its copy of the topic holds what the
	// master delivered, once (replicated), not a second time.
	waitCaughtUp(t, m, s)
	sameLogs(t, m, s)

	// Progress past the slave's own schedule queue is capped at its end.
	var apply func([]byte) error
	for _, rm := range s.b.ReplicaMetas() {
		if rm.Code == remoting.GetAllDelayOffset {
			apply = rm.Apply
		}
	}
	require.NotNil(t, apply, "schedule registers its delay offsets for slaves")
	body, err := json.Marshal(map[string]map[string]int64{"offsetTable": {"1": 50, "2": 9}})
	require.NoError(t, err)
	require.NoError(t, apply(body))
	assert.Equal(t, int64(3), ssvc.Progress()[1], "capped at the 3 records the slave holds")
	assert.Equal(t, int64(0), ssvc.Progress()[2], "a level the slave holds nothing of stays at 0")
	assert.Error(t, apply([]byte("{not json")), "a malformed document is an error, progress kept")
	assert.Equal(t, int64(3), ssvc.Progress()[1])
}

// TestReadyDocs: a copied document applies only once the slave's log has
// reached the master's log end read with it; the newest such copy wins,
// newer ones wait, and documents of different codes are independent.
func TestReadyDocs(t *testing.T) {
	delay := broker.ReplicaMeta{Name: "delay", Code: remoting.GetAllDelayOffset}
	other := broker.ReplicaMeta{Name: "other", Code: 9999}
	doc := func(m broker.ReplicaMeta, body string, need int64) pendingDoc {
		return pendingDoc{meta: m, body: []byte(body), need: need}
	}
	bodies := func(ds []pendingDoc) []string {
		var out []string
		for _, d := range ds {
			out = append(out, string(d.body))
		}
		return out
	}
	pending := []pendingDoc{doc(delay, "d1", 100), doc(other, "o1", 150), doc(delay, "d2", 200), doc(delay, "d3", 300)}

	apply, keep := readyDocs(pending, 99)
	assert.Empty(t, apply, "behind every copy: nothing applies")
	assert.Equal(t, []string{"d1", "o1", "d2", "d3"}, bodies(keep))

	apply, keep = readyDocs(pending, 250)
	assert.Equal(t, []string{"o1", "d2"}, bodies(apply), "the newest copy caught up with, per document")
	assert.Equal(t, []string{"d3"}, bodies(keep), "d1 superseded, d3 still ahead of the log")

	apply, keep = readyDocs(keep, 300)
	assert.Equal(t, []string{"d3"}, bodies(apply))
	assert.Empty(t, keep)
}

// TestSlaveCopiesRecalledTimers: a timer message recalled on the master
// (RECALL_MESSAGE) is copied to the slave with the delay progress
// (GET_ALL_DELAY_OFFSET's timerRecalled); once the master is gone and the
// slave promoted, the slave skips the recalled message and delivers its
// neighbour, as the master would have.
func TestSlaveCopiesRecalledTimers(t *testing.T) {
	m, s := masterSlave(t, broker.RoleAsyncMaster)
	msvc, ssvc := startSchedule(t, m), startSchedule(t, s)
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	at := time.Now().Add(4 * time.Second).UnixMilli()
	timer := func(id string) *remoting.Command {
		return sendProps(ctx, t, c, m.addr, "Held", id,
			message.Properties{"UNIQ_KEY": id, message.PropertyTimerDeliverMS: strconv.FormatInt(at, 10)})
	}
	gone := timer("recalled")
	timer("kept")
	handle := gone.ExtFields["recallHandle"]
	require.NotEmpty(t, handle, "a held timer message is answered with its recall handle")
	resp, err := c.Invoke(ctx, m.addr, remoting.NewRequest(remoting.RecallMessage, map[string]string{
		"producerGroup": "PG", "topic": "Held", "recallHandle": handle,
	}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// The master's answer carries the recalled timer; the slave's, once
	// it copied it, too (its own durable set).
	recalledOn := func(addr string) []string {
		resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		var doc struct {
			TimerRecalled []struct {
				ID string `json:"msgId"`
			} `json:"timerRecalled"`
		}
		require.NoError(t, json.Unmarshal(resp.Body, &doc), string(resp.Body))
		var ids []string
		for _, r := range doc.TimerRecalled {
			ids = append(ids, r.ID)
		}
		return ids
	}
	assert.Equal(t, []string{"recalled"}, recalledOn(m.addr))
	require.Eventually(t, func() bool { return len(recalledOn(s.addr)) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the slave copies the master's recalled timers")
	assert.Equal(t, []string{"recalled"}, recalledOn(s.addr))
	waitCaughtUp(t, m, s)

	// The master goes away before the timers are due; the slave is
	// promoted and delivers them.
	m.stop()
	s.b.SetRole(broker.RoleState{Role: broker.RoleAsyncMaster, Writable: true})
	q := store.Queue{Topic: "Held", ID: 0}
	require.Eventually(t, func() bool {
		_, max, err := s.st.Offsets(q)
		return err == nil && max >= 1
	}, 15*time.Second, 20*time.Millisecond, "the promoted slave delivers the timer it holds")
	time.Sleep(300 * time.Millisecond) // a second delivery would have landed by now
	var res store.ReadResult
	require.NoError(t, s.st.Read(ctx, q, 0, store.ReadOptions{MaxMessages: 10, MaxBytes: 1 << 20}, &res))
	var bodies []string
	for _, rec := range res.Records {
		me, _, err := message.DecodeStored(rec)
		require.NoError(t, err)
		bodies = append(bodies, string(me.Body))
	}
	assert.Equal(t, []string{"kept"}, bodies, "the recalled timer is not delivered by the promoted slave")
	assert.Equal(t, int64(1), ssvc.Recalled(), "the promoted slave skipped one recalled timer")
	assert.Zero(t, msvc.Recalled(), "the master was gone before the timers were due")
}
