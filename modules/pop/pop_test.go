package pop

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
)

func TestReceiveAck(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 2)
		for i, b := range []string{"a", "b", "c", "d"} {
			n.put("T", int32(i%2), "", b)
		}
		got := n.receive("G", "T", nil, 10, 30*time.Second)
		require.Len(t, got, 4)
		assert.ElementsMatch(t, []string{"a", "b", "c", "d"}, bodies(got))
		for _, r := range got {
			assert.Equal(t, int32(1), r.Attempt)
			assert.Equal(t, n.clock.now().Add(30*time.Second).UnixMilli(), r.InvisibleUntil.UnixMilli())
		}
		assert.Empty(t, n.receive("G", "T", nil, 10, 30*time.Second), "in flight messages are invisible")
		// Another group consumes independently.
		assert.Len(t, n.receive("G2", "T", nil, 10, 30*time.Second), 4)
		assert.Equal(t, 4, n.s.InFlight("G", "T"))
		for _, r := range got {
			require.NoError(t, n.s.Ack(context.Background(), "G", "T", r.Handle))
		}
		assert.Equal(t, 0, n.s.InFlight("G", "T"))
		// Acking again is idempotent.
		require.NoError(t, n.s.Ack(context.Background(), "G", "T", got[0].Handle))
		// Acked messages never come back, even after the invisible time.
		n.clock.add(time.Minute)
		assert.Empty(t, n.receive("G", "T", nil, 10, 30*time.Second))
		// The group's progress shows in the broker's offset table.
		for q := int32(0); q < 2; q++ {
			off, ok := n.b.QueryOffset("G", "T", q)
			require.True(t, ok)
			assert.Equal(t, int64(2), off)
		}
		// A new message after the acks is delivered.
		n.put("T", 1, "", "e")
		assert.Equal(t, []string{"e"}, bodies(n.receive("G", "T", nil, 10, 30*time.Second)))
	})
}

func TestReceiveBatchLimit(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	for _, b := range []string{"a", "b", "c"} {
		n.put("T", 0, "", b)
	}
	assert.Equal(t, []string{"a", "b"}, bodies(n.receive("G", "T", nil, 2, time.Minute)))
	assert.Equal(t, []string{"c"}, bodies(n.receive("G", "T", nil, 2, time.Minute)))
}

func TestRedeliveryAfterInvisible(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 1)
		n.put("T", 0, "", "a")
		n.put("T", 0, "", "b")
		first := n.receive("G", "T", nil, 10, 10*time.Second)
		require.Len(t, first, 2)
		require.NoError(t, n.s.Ack(context.Background(), "G", "T", first[1].Handle))
		n.clock.add(9 * time.Second)
		assert.Empty(t, n.receive("G", "T", nil, 10, 10*time.Second), "still invisible")
		n.clock.add(time.Second)
		again := n.receive("G", "T", nil, 10, 10*time.Second)
		require.Len(t, again, 1, "only the unacked message comes back")
		assert.Equal(t, "a", string(again[0].Message.Body))
		assert.Equal(t, int32(2), again[0].Attempt)
		assert.Equal(t, first[0].Offset, again[0].Offset)
		assert.NotEqual(t, first[0].Handle, again[0].Handle)
		// The first delivery's handle is dead now.
		err := n.s.Ack(context.Background(), "G", "T", first[0].Handle)
		assert.ErrorIs(t, err, ErrInvalidHandle)
		n.clock.add(10 * time.Second)
		third := n.receive("G", "T", nil, 10, 10*time.Second)
		require.Len(t, third, 1)
		assert.Equal(t, int32(3), third[0].Attempt)
		require.NoError(t, n.s.Ack(context.Background(), "G", "T", third[0].Handle))
		n.clock.add(time.Hour)
		assert.Empty(t, n.receive("G", "T", nil, 10, 10*time.Second))
	})
}

func TestChangeInvisible(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	n.put("T", 0, "", "a")
	got := n.receive("G", "T", nil, 1, 10*time.Second)
	require.Len(t, got, 1)
	ctx := context.Background()
	// Longer: not visible when the first invisible time passes.
	h2, err := n.s.ChangeInvisible(ctx, "G", "T", got[0].Handle, time.Minute)
	require.NoError(t, err)
	assert.NotEqual(t, got[0].Handle, h2)
	n.clock.add(30 * time.Second)
	assert.Empty(t, n.receive("G", "T", nil, 1, 10*time.Second))
	// The replaced handle is refused, the new one works.
	_, err = n.s.ChangeInvisible(ctx, "G", "T", got[0].Handle, 0)
	assert.ErrorIs(t, err, ErrInvalidHandle)
	// Zero: visible at once, as a redelivery with the next attempt.
	_, err = n.s.ChangeInvisible(ctx, "G", "T", h2, 0)
	require.NoError(t, err)
	again := n.receive("G", "T", nil, 1, 10*time.Second)
	require.Len(t, again, 1)
	assert.Equal(t, int32(2), again[0].Attempt)
	_, err = n.s.ChangeInvisible(ctx, "G", "T", again[0].Handle, -time.Second)
	assert.ErrorIs(t, err, ErrBadArgument)
	require.NoError(t, n.s.Ack(ctx, "G", "T", again[0].Handle))
	_, err = n.s.ChangeInvisible(ctx, "G", "T", again[0].Handle, time.Second)
	assert.ErrorIs(t, err, ErrInvalidHandle, "acked")
}

func TestRestartKeepsState(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 2)
		for i, b := range []string{"a", "b", "c", "d", "e", "f"} {
			n.put("T", int32(i%2), "", b)
		}
		got := n.receive("G", "T", nil, 4, 20*time.Second)
		require.Len(t, got, 4)
		ctx := context.Background()
		acked := map[string]bool{}
		for _, r := range got[:2] {
			require.NoError(t, n.s.Ack(ctx, "G", "T", r.Handle))
			acked[string(r.Message.Body)] = true
		}
		n = n.restart()
		// A handle issued before the restart still works.
		require.NoError(t, n.s.Ack(ctx, "G", "T", got[2].Handle))
		acked[string(got[2].Message.Body)] = true
		// Not yet visible: only the two never delivered arrive.
		fresh := n.receive("G", "T", nil, 10, 20*time.Second)
		require.Len(t, fresh, 2)
		for _, r := range fresh {
			assert.Equal(t, int32(1), r.Attempt)
			assert.False(t, acked[string(r.Message.Body)])
		}
		n.clock.add(21 * time.Second)
		n = n.restart()
		redo := n.receive("G", "T", nil, 10, 20*time.Second)
		require.Len(t, redo, 3, "the unacked message and the two fresh ones come back")
		seen := map[string]bool{}
		for _, r := range redo {
			assert.False(t, acked[string(r.Message.Body)], "acked %s redelivered", r.Message.Body)
			assert.Equal(t, int32(2), r.Attempt)
			seen[string(r.Message.Body)] = true
			require.NoError(t, n.s.Ack(ctx, "G", "T", r.Handle))
		}
		assert.Len(t, seen, 3)
		n = n.restart()
		n.clock.add(time.Hour)
		assert.Empty(t, n.receive("G", "T", nil, 10, 20*time.Second))
		assert.Equal(t, 0, n.s.InFlight("G", "T"))
	})
}

func TestCompactionAndTornTail(t *testing.T) {
	n := startNode(t, engines[0], t.TempDir(), &Config{CompactEvery: 3, MaxBatch: 32}, &clock{t: time.Unix(1_700_000_000, 0)})
	n.topic("T", 1)
	for _, b := range []string{"a", "b", "c", "d", "e"} {
		n.put("T", 0, "", b)
	}
	got := n.receive("G", "T", nil, 10, time.Minute)
	require.Len(t, got, 5)
	ctx := context.Background()
	for _, r := range got[:3] {
		require.NoError(t, n.s.Ack(ctx, "G", "T", r.Handle))
	}
	_, err := os.Stat(filepath.Join(n.dir, "pop", snapshotFile))
	require.NoError(t, err, "a snapshot was written")
	n.stop()
	// A torn, half-written last line is cut off on open.
	f, err := os.OpenFile(filepath.Join(n.dir, "pop", journalFile), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`deadbeef {"s":999,"k":"ack","g":"G","t":"T","q":0,"o`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	n = startNode(t, engines[0], n.dir, n.cfg, n.clock)
	assert.Equal(t, 2, n.s.InFlight("G", "T"))
	n.clock.add(2 * time.Minute)
	redo := n.receive("G", "T", nil, 10, time.Minute)
	assert.Equal(t, []string{"d", "e"}, bodies(redo))
	// Writing after the cut works and survives another restart.
	require.NoError(t, n.s.Ack(ctx, "G", "T", redo[0].Handle))
	n = n.restart()
	assert.Equal(t, 1, n.s.InFlight("G", "T"))
}

func TestHandleValidation(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	n.topic("U", 1)
	n.put("T", 0, "", "a")
	n.put("U", 0, "", "b")
	got := n.receive("G", "T", nil, 1, time.Minute)
	require.Len(t, got, 1)
	n.receive("G2", "T", nil, 1, time.Minute)
	n.receive("G", "U", nil, 1, time.Minute)
	h := got[0].Handle
	tampered := []byte(h)
	tampered[3] ^= 1
	ctx := context.Background()
	tests := []struct {
		name         string
		group, topic string
		give         string
	}{
		{"other group", "G2", "T", h},
		{"other topic", "G", "U", h},
		{"tampered", "G", "T", string(tampered)},
		{"garbage", "G", "T", "not a handle"},
		{"empty", "G", "T", ""},
		{"huge", "G", "T", string(make([]byte, 1<<16))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, n.s.Ack(ctx, tt.group, tt.topic, tt.give), ErrInvalidHandle)
			_, err := n.s.ChangeInvisible(ctx, tt.group, tt.topic, tt.give, 0)
			assert.ErrorIs(t, err, ErrInvalidHandle)
			assert.ErrorIs(t, n.s.ForwardToDLQ(ctx, tt.group, tt.topic, tt.give), ErrInvalidHandle)
		})
	}
	assert.Equal(t, 1, n.s.InFlight("G", "T"), "nothing was acked by a bad handle")
	assert.Equal(t, 1, n.s.InFlight("G2", "T"))
}

func TestBadArguments(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	ctx := context.Background()
	_, err := n.s.Receive(ctx, "G", "nope", nil, 1, time.Minute)
	assert.ErrorIs(t, err, ErrTopicNotFound)
	_, err = n.s.Receive(ctx, "", "T", nil, 1, time.Minute)
	assert.ErrorIs(t, err, ErrBadArgument)
	_, err = n.s.Receive(ctx, "G\x00x", "T", nil, 1, time.Minute)
	assert.ErrorIs(t, err, ErrBadArgument)
	_, err = n.s.Receive(ctx, "G", "T", nil, 0, time.Minute)
	assert.ErrorIs(t, err, ErrBadArgument)
	_, err = n.s.Receive(ctx, "G", "T", nil, 1, 0)
	assert.ErrorIs(t, err, ErrBadArgument)
	_, err = n.s.Receive(ctx, "G", "T", nil, 1, 25*time.Hour)
	assert.ErrorIs(t, err, ErrBadArgument)
}

func TestTagFilter(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 1)
		n.put("T", 0, "A", "a1")
		n.put("T", 0, "B", "b1")
		n.put("T", 0, "A", "a2")
		n.put("T", 0, "C", "c1")
		m, err := n.tagc.Compile("A || C")
		require.NoError(t, err)
		assert.Equal(t, []string{"a1", "a2", "c1"}, bodies(n.receive("G", "T", m, 10, time.Minute)))
		assert.Equal(t, 3, n.s.InFlight("G", "T"), "skipped messages are not in flight")
		// The position moved past the skipped message for good.
		n = n.restart()
		n.put("T", 0, "B", "b2")
		n.put("T", 0, "A", "a3")
		assert.Equal(t, []string{"a3"}, bodies(n.receive("G", "T", m, 10, time.Minute)))
	})
}

func TestForwardToDLQ(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 1)
		n.put("T", 0, "A", "a")
		got := n.receive("G", "T", nil, 1, time.Second)
		require.Len(t, got, 1)
		n.clock.add(time.Second)
		got = n.receive("G", "T", nil, 1, time.Second)
		require.Len(t, got, 1)
		require.Equal(t, int32(2), got[0].Attempt)
		ctx := context.Background()
		require.NoError(t, n.s.ForwardToDLQ(ctx, "G", "T", got[0].Handle))
		n.clock.add(time.Hour)
		assert.Empty(t, n.receive("G", "T", nil, 1, time.Second), "a dead letter is not redelivered")
		var res store.ReadResult
		require.NoError(t, n.st.Read(ctx, store.Queue{Topic: protocol.DLQTopic("G")}, 0, store.ReadOptions{}, &res))
		require.Len(t, res.Records, 1)
		dl, _, err := message.DecodeStored(res.Records[0])
		require.NoError(t, err)
		assert.Equal(t, "a", string(dl.Body))
		assert.Equal(t, "T", dl.Properties[message.PropertyRetryTopic])
		assert.Equal(t, "A", dl.Properties[message.PropertyTags])
		assert.Equal(t, "U-a", dl.Properties[message.PropertyOriginMessageID])
		assert.Equal(t, int32(2), dl.ReconsumeTimes)
		assert.ErrorIs(t, n.s.ForwardToDLQ(ctx, "G", "T", got[0].Handle), ErrInvalidHandle)
	})
}

func TestReceiveWait(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	ctx := context.Background()
	got, err := n.s.ReceiveWait(ctx, "G", "T", nil, 1, time.Minute, 20*time.Millisecond)
	require.NoError(t, err)
	assert.Empty(t, got, "nothing arrives: the wait ends")
	done := make(chan []Received)
	go func() {
		got, err := n.s.ReceiveWait(ctx, "G", "T", nil, 1, time.Minute, time.Minute)
		assert.NoError(t, err)
		done <- got
	}()
	n.put("T", 0, "", "late")
	select {
	case got := <-done:
		assert.Equal(t, []string{"late"}, bodies(got))
	case <-time.After(30 * time.Second):
		t.Fatal("a stored message did not wake the waiting receive")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = n.s.ReceiveWait(cctx, "G", "T", nil, 1, time.Minute, time.Minute)
	assert.ErrorIs(t, err, context.Canceled)
}

// TestChangeInvisibleWakesWaitingReceive: a receive waiting while the
// only message in flight is invisible for a minute gets it at once when
// ChangeInvisible makes it visible (a consumer's nack), not when the
// minute it saw when it began waiting has passed.
func TestChangeInvisibleWakesWaitingReceive(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	n.put("T", 0, "", "m")
	ctx := context.Background()
	first := n.receive("G", "T", nil, 1, time.Minute)
	require.Len(t, first, 1)
	done := make(chan []Received, 1)
	go func() {
		got, err := n.s.ReceiveWait(ctx, "G", "T", nil, 1, time.Minute, time.Minute)
		assert.NoError(t, err)
		done <- got
	}()
	require.Eventually(t, func() bool {
		n.s.sigMu.Lock()
		defer n.s.sigMu.Unlock()
		return n.s.sigs["T"] != nil
	}, 10*time.Second, time.Millisecond, "the receive waits")
	_, err := n.s.ChangeInvisible(ctx, "G", "T", first[0].Handle, 0)
	require.NoError(t, err)
	select {
	case got := <-done:
		assert.Equal(t, []string{"m"}, bodies(got))
		assert.Equal(t, int32(2), got[0].Attempt)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting receive missed the message made visible")
	}
}

// TestStoreWakesOnlyItsTopic: a stored message wakes the receives
// waiting on its topic and no other (with 10,000 receives waiting on other
// topics, waking all of them on every send queued their scans ahead of the
// one that had a message; issue 37's gRPC flood).
func TestStoreWakesOnlyItsTopic(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("A", 1)
	n.topic("B", 1)
	a, b := n.s.signal("A"), n.s.signal("B")
	assert.Equal(t, a, n.s.signal("A"), "receives of one topic share its channel")
	n.put("B", 0, "", "b")
	select {
	case <-b:
	default:
		t.Fatal("a message of B did not wake B's receives")
	}
	select {
	case <-a:
		t.Fatal("a message of B woke A's receives")
	default:
	}
	n.put("A", 0, "", "a")
	select {
	case <-a:
	default:
		t.Fatal("a message of A did not wake A's receives")
	}
}

func TestConcurrentReceiveAck(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 4)
		const total = 200
		for i := 0; i < total; i++ {
			n.put("T", int32(i%4), "", string(rune('A'+i%26))+time.Duration(i).String())
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		ctx := context.Background()
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := n.s.Receive(ctx, "G", "T", nil, 7, time.Hour)
					if !assert.NoError(t, err) || len(got) == 0 {
						return
					}
					for _, r := range got {
						mu.Lock()
						seen[string(r.Message.Body)]++
						mu.Unlock()
						assert.NoError(t, n.s.Ack(ctx, "G", "T", r.Handle))
					}
				}
			}()
		}
		wg.Wait()
		assert.Len(t, seen, total)
		for b, c := range seen {
			assert.Equal(t, 1, c, "message %s delivered %d times", b, c)
		}
		assert.Equal(t, 0, n.s.InFlight("G", "T"))
	})
}

func TestClosed(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	require.NoError(t, n.s.Close())
	_, err := n.s.Receive(context.Background(), "G", "T", nil, 1, time.Minute)
	assert.True(t, errors.Is(err, ErrClosed))
	assert.ErrorIs(t, n.s.Ack(context.Background(), "G", "T", "x"), ErrClosed)
}

func TestReceiveFIFO(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 2)
		for _, b := range []string{"a1", "a2", "a3"} {
			n.put("T", 0, "", b) // message group a → queue 0
		}
		n.put("T", 1, "", "b1") // message group b → queue 1
		ctx := context.Background()
		recv := func(maxMsgs int) []Received {
			t.Helper()
			got, err := n.s.ReceiveFIFO(ctx, "G", "T", nil, maxMsgs, 10*time.Second)
			require.NoError(t, err)
			return got
		}
		first := recv(2)
		require.Len(t, first, 2)
		// Whatever the queue order, queue 0 hands out a prefix in order.
		rest := recv(10)
		all := append(append([]Received{}, first...), rest...)
		var got0 []string
		for _, r := range all {
			if r.Queue == 0 {
				got0 = append(got0, string(r.Message.Body))
			}
		}
		require.NotEmpty(t, got0)
		assert.Equal(t, []string{"a1", "a2", "a3"}[:len(got0)], got0, "in order")
		assert.Len(t, all, 1+len(got0), "queue 1's message arrives; queue 0 holds back behind its batch")
		assert.Empty(t, recv(10), "nothing new while batches are in flight")
		// Ack the first of queue 0's batch, let the rest time out: they come
		// back together, in order, before anything newer.
		var batch0 []Received
		for _, r := range all {
			if r.Queue == 0 {
				batch0 = append(batch0, r)
			} else {
				require.NoError(t, n.s.Ack(ctx, "G", "T", r.Handle))
			}
		}
		require.NoError(t, n.s.Ack(ctx, "G", "T", batch0[0].Handle))
		n.clock.add(11 * time.Second)
		again := recv(10)
		var want []string
		for _, r := range batch0[1:] {
			want = append(want, string(r.Message.Body))
		}
		assert.Equal(t, want, bodies(again))
		for _, r := range again {
			assert.Equal(t, int32(2), r.Attempt)
			require.NoError(t, n.s.Ack(ctx, "G", "T", r.Handle))
		}
		if len(got0) < 3 {
			assert.Equal(t, []string{"a1", "a2", "a3"}[len(got0):], bodies(recv(10)))
		}
	})
}

// TestTornBatch cuts a receive batch's last journal record in half, as a
// crash during the write would (the receive never returned): the messages
// whose records are lost are delivered again as new, none is lost.
func TestTornBatch(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 1)
		for _, b := range []string{"a", "b", "c"} {
			n.put("T", 0, "", b)
		}
		require.Len(t, n.receive("G", "T", nil, 10, time.Minute), 3)
		n.stop()
		p := filepath.Join(n.dir, "pop", journalFile)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		lines := bytes.SplitAfter(b, []byte("\n"))
		require.Len(t, lines, 4) // three records and the empty rest
		last := lines[2]
		require.NoError(t, os.WriteFile(p, append(append(lines[0], lines[1]...), last[:len(last)/2]...), 0o644))
		n = startNode(t, e, n.dir, n.cfg, n.clock)
		assert.Equal(t, 2, n.s.InFlight("G", "T"))
		got := n.receive("G", "T", nil, 10, time.Minute)
		assert.Equal(t, []string{"c"}, bodies(got))
		assert.Equal(t, int32(1), got[0].Attempt)
	})
}

// TestCrashWithoutClose reopens the state on the same files while the
// first instance was never closed (a killed process): what Ack and
// Receive returned is there.
func TestCrashWithoutClose(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	for _, b := range []string{"a", "b"} {
		n.put("T", 0, "", b)
	}
	got := n.receive("G", "T", nil, 10, time.Minute)
	require.Len(t, got, 2)
	require.NoError(t, n.s.Ack(context.Background(), "G", "T", got[0].Handle))
	s2, err := open(n.cfg, n.b, filepath.Join(n.dir, "pop"), nil)
	require.NoError(t, err)
	defer s2.Close()
	s2.now = n.clock.now
	assert.Equal(t, 1, s2.InFlight("G", "T"))
	n.clock.add(2 * time.Minute)
	again, err := s2.Receive(context.Background(), "G", "T", nil, 10, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, bodies(again))
	assert.Equal(t, int32(2), again[0].Attempt)
}

// TestQueueShorterThanPosition: a queue whose end is below the group's
// position (the topic was deleted and made again) is consumed again from
// its end instead of never.
func TestQueueShorterThanPosition(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("T", 1)
	n.put("T", 0, "", "a")
	require.Len(t, n.receive("G", "T", nil, 1, time.Minute), 1)
	n.s.mu.Lock()
	qs := n.s.queues[qkey{"G", "T", 0}]
	qs.next = 100
	qs.inflight[50] = &entry{attempt: 1, until: 0, nonce: 1}
	n.s.mu.Unlock()
	// The entry past the queue's end is unreadable: dropped; the position
	// is reset to the queue's end (1).
	assert.Empty(t, n.receive("G", "T", nil, 10, time.Minute))
	n.put("T", 0, "", "b")
	assert.Equal(t, []string{"b"}, bodies(n.receive("G", "T", nil, 10, time.Minute)))
	n = n.restart()
	assert.Equal(t, 2, n.s.InFlight("G", "T"), "a and b are in flight; the dropped entry is gone")
}

// TestAttemptsUsedUpGoToDLQ: the group's retryMaxTimes bounds deliveries
// (retryMaxTimes + 1 in all, RocketMQ 5's policy); a message whose
// attempts are used up goes to %DLQ%<group> when it would be redelivered,
// and is not delivered again, after a restart too.
func TestAttemptsUsedUpGoToDLQ(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.topic("T", 1)
		gc, err := n.b.GroupConfig("G")
		require.NoError(t, err)
		assert.Equal(t, int32(17), gc.RetryPolicy().MaxAttempts, "default: 16 retries")
		gc.RetryMaxTimes = 2
		require.NoError(t, n.b.PutGroupConfig(gc))
		n.put("T", 0, "", "a")
		n.put("T", 0, "", "b")
		for attempt := int32(1); attempt <= 3; attempt++ {
			got := n.receive("G", "T", nil, 10, time.Second)
			require.Len(t, got, 2, "attempt %d", attempt)
			for _, r := range got {
				assert.Equal(t, attempt, r.Attempt)
			}
			if attempt == 3 {
				require.NoError(t, n.s.Ack(context.Background(), "G", "T", got[1].Handle), "b is consumed on its last attempt")
			}
			n.clock.add(time.Second)
		}
		assert.Empty(t, n.receive("G", "T", nil, 10, time.Second), "a's 3 attempts are used up")
		assert.Equal(t, 0, n.s.InFlight("G", "T"))
		var res store.ReadResult
		ctx := context.Background()
		require.NoError(t, n.st.Read(ctx, store.Queue{Topic: protocol.DLQTopic("G")}, 0, store.ReadOptions{}, &res))
		require.Len(t, res.Records, 1)
		dl, _, err := message.DecodeStored(res.Records[0])
		require.NoError(t, err)
		assert.Equal(t, "a", string(dl.Body))
		assert.Equal(t, "T", dl.Properties[message.PropertyRetryTopic])
		assert.Equal(t, int32(3), dl.ReconsumeTimes)
		n = n.restart()
		n.clock.add(time.Hour)
		assert.Empty(t, n.receive("G", "T", nil, 10, time.Second), "not delivered again after a restart")
	})
}
