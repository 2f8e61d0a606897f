package interop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// crashBody derives a message body from its id, so a stored body can be
// checked byte for byte without keeping it.
func crashBody(id string) []byte {
	h := sha256.Sum256([]byte(id))
	n := 64 + int(binary.BigEndian.Uint16(h[:2]))%1500
	b := make([]byte, 0, n+len(id)+1)
	b = append(b, id...)
	b = append(b, '|')
	for len(b) < n+len(id)+1 {
		h = sha256.Sum256(h[:])
		b = append(b, h[:]...)
	}
	return b[:n+len(id)+1]
}

func crashID(body []byte) string {
	i := bytes.IndexByte(body, '|')
	if i < 0 {
		return ""
	}
	return string(body[:i])
}

type acked struct {
	mu  sync.Mutex
	ids map[string]time.Time // id → when it was acknowledged
}

func (a *acked) add(id string) {
	a.mu.Lock()
	a.ids[id] = time.Now()
	a.mu.Unlock()
}

// readAll pulls every queue of topic from its min offset to its max and
// returns the decoded messages by queue, failing on any undecodable or
// corrupt record and on gaps in queue offsets.
func readAll(t *testing.T, srv *testserver.Proc, topic string, queues int) map[int][]*message.Ext {
	t.Helper()
	c := rawClient(t)
	out := map[int][]*message.Ext{}
	for q := 0; q < queues; q++ {
		next := int64(0)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.PullMessage, map[string]string{
				"consumerGroup": "crash-verifier", "topic": topic, "queueId": strconv.Itoa(q),
				"queueOffset": strconv.FormatInt(next, 10), "maxMsgNums": "32", "sysFlag": "4",
				"commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
			}, nil))
			cancel()
			require.NoError(t, err)
			if resp.Code == remoting.PullNotFound || resp.Code == remoting.TopicNotExist {
				break
			}
			require.Equal(t, remoting.Success, resp.Code, "queue %d offset %d: %s", q, next, resp.Remark)
			msgs, err := message.DecodeAll(resp.Body)
			require.NoError(t, err, "queue %d: undecodable pull body", q)
			for _, m := range msgs {
				require.True(t, m.VerifyCRC(), "queue %d offset %d: body CRC mismatch", q, m.QueueOffset)
				require.Equal(t, next, m.QueueOffset, "queue %d: offsets not dense", q)
				next++
				out[q] = append(out[q], m)
			}
			n, err := strconv.ParseInt(resp.Ext("nextBeginOffset"), 10, 64)
			require.NoError(t, err)
			require.Equal(t, next, n)
		}
	}
	return out
}

// runCrashRounds kills `mq dev` with SIGKILL at random moments while
// producers of the official client send, restarts it, and checks what
// survived. allowLoss says whether an acknowledged message may be missing,
// given when it was acknowledged and when the process was killed.
func runCrashRounds(t *testing.T, rounds int, sets []string, allowLoss func(ackedAt, killedAt time.Time) bool) {
	srv := testserver.StartDev(t, testserver.Options{Sets: sets})
	topic := uniq("Crash")
	const queues = 4
	all := &acked{ids: map[string]time.Time{}}
	kills := make([]time.Time, 0, rounds)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for r := 0; r < rounds; r++ {
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for pi := 0; pi < 3; pi++ {
			p := crashProducer(t, srv.Namesrv, "Crash")
			wg.Add(1)
			go func(pi int, p rocketmq.Producer) {
				defer wg.Done()
				defer p.Shutdown()
				for seq := 0; seq < 100000 && ctx.Err() == nil; seq++ {
					id := fmt.Sprintf("r%d-p%d-%d", r, pi, seq)
					msg := primitive.NewMessage(topic, crashBody(id))
					msg.WithProperty("crash-id", id)
					sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					res, err := p.SendSync(sctx, msg)
					cancel()
					if err == nil && res.Status == primitive.SendOK {
						all.add(id)
					}
				}
			}(pi, p)
		}
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		srv.Kill()
		kills = append(kills, time.Now())
		stop()
		wg.Wait()
		srv.Start()
	}

	got := readAll(t, srv, topic, queues)
	stored := map[string]bool{}
	for q, msgs := range got {
		for _, m := range msgs {
			id := crashID(m.Body)
			require.NotEmpty(t, id, "queue %d offset %d: unknown body", q, m.QueueOffset)
			assert.Equal(t, crashBody(id), m.Body, "message %s: body differs", id)
			assert.Equal(t, id, m.Properties["crash-id"])
			assert.Equal(t, topic, m.Topic)
			stored[id] = true
		}
	}
	missing := 0
	all.mu.Lock()
	defer all.mu.Unlock()
	for id, at := range all.ids {
		if stored[id] {
			continue
		}
		var round int
		fmt.Sscanf(id, "r%d-", &round)
		if !allowLoss(at, kills[round]) {
			missing++
			if missing < 10 {
				t.Errorf("acknowledged message %s (acked %s before the kill) was lost", id, kills[round].Sub(at))
			}
		}
	}
	assert.Zero(t, missing, "acknowledged messages lost")
	require.NotEmpty(t, all.ids, "no message was acknowledged at all")
	t.Logf("%d rounds, %d acknowledged, %d stored", rounds, len(all.ids), len(stored))
}

// engineSets is sets plus small commitlog segments (more segment
// boundaries to crash across) when the engine under test is commitlog;
// make test runs the crash tests again with QUIVER_STORAGE__ENGINE=pebble,
// where commitlog keys are refused as doing nothing. The disk-space
// trigger of retention is off: on a build machine whose disk is used
// above disk_max_used_ratio (0.75, as df's Use%) the cleaner deletes,
// every 10 s, everything stored more than about 32 s before, and the
// crash tests read back every message since the first.
func engineSets(sets ...string) []string {
	sets = append([]string{"storage.disk_max_used_ratio=0"}, sets...)
	if e := os.Getenv("QUIVER_STORAGE__ENGINE"); e == "" || e == "commitlog" {
		sets = append(sets, "storage.commitlog.segment_size=1MiB")
	}
	return sets
}

func crashRounds() int {
	if testing.Short() {
		return 4
	}
	return 20
}

// TestCrashSyncFlushLosesNothing: with storage.flush=sync every
// acknowledged message survives SIGKILL, bodies are identical, nothing
// unacknowledged is garbage, and queue offsets stay dense.
func TestCrashSyncFlushLosesNothing(t *testing.T) {
	runCrashRounds(t, crashRounds(), engineSets("storage.flush=sync"),
		func(time.Time, time.Time) bool { return false })
}

// TestCrashAsyncFlushBoundedLoss: with storage.flush=async only messages
// acknowledged within the last flush interval before the kill may be lost
// (a process kill keeps the page cache, so in practice none are).
func TestCrashAsyncFlushBoundedLoss(t *testing.T) {
	const interval = 500 * time.Millisecond
	runCrashRounds(t, crashRounds()/2, engineSets("storage.flush=async", "storage.flush_interval="+interval.String()),
		func(ackedAt, killedAt time.Time) bool { return killedAt.Sub(ackedAt) <= interval+100*time.Millisecond })
}

// crashProducer starts an official producer for the crash tests: no
// retries (a send the crash cut is simply not acknowledged) and a short
// send timeout. The caller shuts it down.
func crashProducer(t *testing.T, ns, prefix string) rocketmq.Producer {
	t.Helper()
	p, err := rocketmq.NewProducer(
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName(uniq(prefix+"PG")),
		producer.WithInstanceName(uniq(strings.ToLower(prefix))),
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(2*time.Second),
	)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	return p
}
