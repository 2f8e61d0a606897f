package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

func TestBenchProduceAgainstLiveBroker(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	for _, mode := range []string{"sync", "async", "oneway"} {
		t.Run(mode, func(t *testing.T) {
			r, err := benchProduce(context.Background(), &produceFlags{
				namesrv: srv.Namesrv, topic: "BenchCmd" + mode, size: 128, concurrency: 2,
				count: 500, duration: 30 * time.Second, mode: mode,
			})
			require.NoError(t, err)
			assert.Equal(t, int64(500), r.Messages)
			assert.Zero(t, r.Errors)
			assert.Equal(t, int64(500*128), r.Bytes)
			if mode != "oneway" {
				assert.Positive(t, r.P50Micros)
				assert.GreaterOrEqual(t, r.P99Micros, r.P50Micros)
			}
		})
	}
}

func TestBenchConsumeDrainsBacklog(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	r, err := benchProduce(context.Background(), &produceFlags{
		namesrv: srv.Namesrv, topic: "BenchConsume", size: 100, concurrency: 2, count: 1000, duration: 30 * time.Second, mode: "sync",
	})
	require.NoError(t, err)
	require.Equal(t, int64(1000), r.Messages)
	// The broker registers the auto-created topic with the name server
	// asynchronously.
	a := newAdmin(srv.Namesrv, 5*time.Second)
	defer a.Close()
	require.Eventually(t, func() bool {
		_, ok, err := a.route(context.Background(), "BenchConsume")
		return err == nil && ok
	}, 10*time.Second, 20*time.Millisecond)
	for _, tt := range []struct {
		concurrency int
		count, want int64
	}{{1, 0, 1000}, {3, 0, 1000}, {2, 300, 300}} {
		c, err := benchConsume(context.Background(), &consumeFlags{
			namesrv: srv.Namesrv, topic: "BenchConsume", group: "BENCH_CONSUMER", concurrency: tt.concurrency, count: tt.count, batch: 32, duration: 30 * time.Second,
		})
		require.NoError(t, err)
		if tt.count == 0 {
			assert.Equal(t, tt.want, c.Messages)
		} else {
			assert.GreaterOrEqual(t, c.Messages, tt.want)
			assert.Less(t, c.Messages, tt.want+int64(tt.concurrency)*32)
		}
		assert.Zero(t, c.Errors)
		assert.Positive(t, c.MsgsPerSec)
		assert.Greater(t, c.Bytes, c.Messages*100)
		assert.Positive(t, c.P50Micros)
	}
	_, err = benchConsume(context.Background(), &consumeFlags{namesrv: srv.Namesrv, topic: "NoSuchTopic", concurrency: 1, batch: 32, duration: time.Minute})
	assert.ErrorContains(t, err, "does not exist")
}

func TestLatencyHistogramQuantiles(t *testing.T) {
	l := newLatencies()
	for i := 1; i <= 1000; i++ {
		l.record(time.Duration(i) * time.Millisecond)
	}
	p50 := l.quantile(0.5)
	assert.InDelta(t, float64(500*time.Millisecond), float64(p50), float64(10*time.Millisecond))
	p99 := l.quantile(0.99)
	assert.InDelta(t, float64(990*time.Millisecond), float64(p99), float64(15*time.Millisecond))
	assert.Equal(t, time.Second, l.max)
}

func TestBenchDisk(t *testing.T) {
	r, err := benchDisk(t.TempDir(), 8<<20, 1<<20)
	require.NoError(t, err)
	assert.Positive(t, r.SeqWriteMBps)
	assert.Positive(t, r.FsyncP50Micros)
}

// TestBenchProduceOverQUIC: a quic:// name server makes mq bench reach the
// broker over QUIC as well.
func TestBenchProduceOverQUIC(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"transports=tcp,quic"}})
	r, err := benchProduce(context.Background(), &produceFlags{
		namesrv: "quic://" + srv.Namesrv, topic: "BenchQUIC", size: 256, concurrency: 2,
		count: 300, duration: 30 * time.Second, mode: "sync",
	})
	require.NoError(t, err)
	assert.Equal(t, int64(300), r.Messages)
	assert.Zero(t, r.Errors)
	assert.Equal(t, "quic://127.0.0.1:1", withScheme("quic://127.0.0.1:9876", "127.0.0.1:1"))
	assert.Equal(t, "127.0.0.1:1", withScheme("127.0.0.1:9876", "127.0.0.1:1"))
}

// TestBenchProgressNotATerminal: with its output on a pipe (TCGETS fails)
// mq bench prints plain progress lines, no \r and no escape codes; the
// summary line gives acknowledged, failed and unknown.
func TestBenchProgressNotATerminal(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	assert.False(t, isTerminal(pw), "a pipe is no terminal")
	var lines bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&lines, pr); close(copied) }()

	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen="}})
	f := &produceFlags{namesrv: srv.Namesrv, topic: "BenchPlain", size: 64, concurrency: 2, count: 0, duration: 400 * time.Millisecond, mode: "sync",
		progress: progressOut{w: pw, tty: isTerminal(pw), interval: 20 * time.Millisecond}}
	r, err := benchProduce(context.Background(), f)
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	<-copied
	out := lines.String()
	assert.NotContains(t, out, "\r")
	assert.NotContains(t, out, "\x1b")
	progressLine := regexp.MustCompile(`^\d+ messages, \d+ msg/s$`)
	var n int
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		assert.Regexp(t, progressLine, l)
		n++
	}
	assert.GreaterOrEqual(t, n, 2, "a line per interval:\n%s", out)
	assert.Positive(t, r.Messages)
	assert.False(t, r.Interrupted, "the duration ran out: finished")

	var rep bytes.Buffer
	require.NoError(t, printReport(&rep, r, false))
	assert.Contains(t, rep.String(), fmt.Sprintf("summary      finished: %d acknowledged, %d failed, %d unknown (in flight when it stopped)\n", r.Messages, r.Errors, r.Unknown))
	var js map[string]any
	rep.Reset()
	require.NoError(t, printReport(&rep, r, true))
	require.NoError(t, json.Unmarshal(rep.Bytes(), &js))
	assert.EqualValues(t, r.Unknown, js["unknown"])
	assert.Equal(t, false, js["interrupted"])

	// A terminal gets the line rewritten in place, and cleared at the end.
	tty := &testserver.Output{}
	stop, done := make(chan struct{}), make(chan struct{})
	var count atomic.Int64
	count.Store(7)
	go progress(progressOut{w: tty, tty: true, interval: time.Millisecond}, stop, done, &count, time.Now())
	require.Eventually(t, func() bool { return strings.Contains(tty.String(), "7 messages") }, 5*time.Second, time.Millisecond)
	close(stop)
	<-done
	assert.True(t, strings.HasPrefix(tty.String(), "\r\x1b[K7 messages"), "%q", tty.String())
	assert.True(t, strings.HasSuffix(tty.String(), "\r\x1b[K"), "%q", tty.String())
}

// TestBenchInterrupted: a run whose context is cancelled (SIGINT in mq)
// ends with a report saying so, and its figures bound what the broker
// stored: acknowledged <= stored <= acknowledged + unknown.
func TestBenchInterrupted(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen="}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &produceFlags{namesrv: srv.Namesrv, topic: "BenchInterrupted", size: 64, concurrency: 2, count: 0, duration: time.Minute, mode: "async"}
	res := make(chan *benchReport, 1)
	go func() {
		r, err := benchProduce(ctx, f)
		assert.NoError(t, err)
		res <- r
	}()
	a := newAdmin(srv.Namesrv, 5*time.Second)
	defer a.Close()
	stored := func() int64 {
		qs, err := (&adm{admin: a, opts: &adminOpts{output: "json"}, w: io.Discard}).topicStatus(context.Background(), f.topic)
		if err != nil {
			return -1
		}
		var n int64
		for _, q := range qs {
			n += q.MaxOffset
		}
		return n
	}
	require.Eventually(t, func() bool { return stored() >= 200 }, 30*time.Second, 10*time.Millisecond)
	cancel()
	r := <-res
	assert.True(t, r.Interrupted)
	assert.Zero(t, r.Errors)
	got := stored()
	assert.GreaterOrEqual(t, got, r.Messages, "every acknowledged message is stored")
	assert.LessOrEqual(t, got, r.Messages+r.Unknown, "what is stored beyond the acknowledged was in flight: counted unknown")
	var rep bytes.Buffer
	require.NoError(t, printReport(&rep, r, false))
	assert.Contains(t, rep.String(), fmt.Sprintf("summary      interrupted: %d acknowledged, 0 failed, %d unknown", r.Messages, r.Unknown))
}
