//go:build linux

package lossy

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/bench/lossy/linkemu"
	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
)

// A lab transport is a transport and, optionally, the congestion
// controller both ends run: "tcp-cubic", "tcp-bbr", "quic-reno",
// "quic-bbr", or a bare "tcp", "quic", "nats" (the defaults: the
// namespace's TCP controller, QUIC's reno).
type variant struct{ base, cc string }

func parseVariant(s string) variant {
	base, cc, _ := strings.Cut(s, "-")
	if base == "quic" && cc == "" {
		cc = "reno"
	}
	return variant{base, cc}
}

// setTCPCongestion makes cc the TCP congestion controller of new sockets
// in this process's namespace (A, where the lab's client runs) and in
// namespace nsB (the broker's): net.ipv4.tcp_congestion_control is per
// network namespace, and a socket keeps the controller it was created
// with, so a rig's connections keep theirs after the next rig changes it.
// A listener's accepted connections take the namespace's default at
// accept time.
func setTCPCongestion(ctx context.Context, t *testing.T, nsB, cc string) {
	const knob = "/proc/sys/net/ipv4/tcp_congestion_control"
	require.NoError(t, os.WriteFile(knob, []byte(cc), 0o644), "namespace A: %s (scripts/lossy-lab.sh adds %s to net.ipv4.tcp_allowed_congestion_control)", knob, cc)
	out, err := linkemu.Command(ctx, nsB, "sh", "-c", "echo "+cc+" > "+knob).CombinedOutput()
	require.NoError(t, err, "namespace %s: %s: %s", nsB, knob, out)
}

// tcpAlgos lists the congestion controller of every established TCP
// connection between the lab's client address and the broker's, keyed by
// the client's port, as `ss -ti` reports them in namespace ns (""= this
// one).
func tcpAlgos(ctx context.Context, ns, addrA string) (map[int]string, error) {
	args := []string{"ss", "-tinH", "state", "established"}
	var cmd *exec.Cmd
	if ns == "" {
		cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	} else {
		cmd = linkemu.Command(ctx, ns, args...)
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ss in %q: %w", ns, err)
	}
	algos := map[int]string{}
	port := -1
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") && len(f) >= 4 {
			// Recv-Q Send-Q Local:Port Peer:Port (state omitted by the filter).
			port = -1
			for _, ep := range f[2:4] {
				host, p, ok := strings.Cut(ep, ":")
				if ok && host == addrA {
					port, _ = strconv.Atoi(p)
				}
			}
			continue
		}
		if port >= 0 {
			for _, w := range f {
				if w == "cubic" || w == "bbr" || w == "reno" {
					algos[port] = w
				}
			}
			port = -1
		}
	}
	return algos, nil
}

// tcpCheck is the controllers a TCP rig's connections actually run, on
// both ends: the rig's client ports are the connections that appeared
// while it was set up.
type tcpCheck struct {
	nsB, addrA string
	ports      []int
}

func newTCPCheck(ctx context.Context, t *testing.T, nsB, addrA string, before map[int]string) *tcpCheck {
	after, err := tcpAlgos(ctx, "", addrA)
	require.NoError(t, err)
	tc := &tcpCheck{nsB: nsB, addrA: addrA}
	for p := range after {
		if _, old := before[p]; !old {
			tc.ports = append(tc.ports, p)
		}
	}
	sort.Ints(tc.ports)
	return tc
}

// String reports "A-side/B-side" controllers of the rig's connections,
// e.g. "cubic/cubic"; "?" where a connection is gone.
func (tc *tcpCheck) String() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, errA := tcpAlgos(ctx, "", tc.addrA)
	b, errB := tcpAlgos(ctx, tc.nsB, tc.addrA)
	if errA != nil || errB != nil || len(tc.ports) == 0 {
		return "?"
	}
	seen := map[string]bool{}
	for _, p := range tc.ports {
		seen[orQ(a[p])+"/"+orQ(b[p])] = true
	}
	var s []string
	for k := range seen {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// labPushTopic is the push workload's topic; each cell reads it with a
// fresh group from its last offset.
const labPushTopic = "LabPush"

// pushFlow: senders goroutines of sync sends to a fresh topic for dur
// while a push consumer (the client's defaults: 32 a pull, long polling)
// in the same process receives them; the latency is send start →
// handler, measured on one clock. Messages still in flight when the sends
// stop get up to 10 s to arrive; the rate is messages received over the
// sending time, the errors count failed sends and messages never
// received.
func pushFlow(t *testing.T, r *rig, body []byte, senders int, dur time.Duration) result {
	ctx := context.Background()
	topic := labPushTopic            // created with the rigs, so routed by now
	var rec atomic.Pointer[recorder] // nil while probing
	var got, probes atomic.Int64
	pc, err := consumer.NewPush(r.c, "LAB_PUSH_"+strconv.FormatInt(time.Now().UnixNano(), 36),
		func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
			now := time.Now()
			cur := rec.Load()
			for _, m := range msgs {
				ns, err := strconv.ParseInt(m.Property("LabSentNs"), 10, 64)
				switch {
				case err != nil:
				case cur == nil || time.Unix(0, ns).Before(cur.start):
					probes.Add(1) // a probe or a message of the wait below
				default:
					cur.add(now.Sub(time.Unix(0, ns)), 1)
					got.Add(1)
				}
			}
			return consumer.ConsumeSuccess
		}, consumer.WithConsumeFrom(consumer.FromLastOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.All()))
	require.NoError(t, pc.Start(ctx))
	defer pc.Shutdown(context.Background()) //nolint:errcheck // the cell's result is measured already

	// The consumer starts from the last offset: wait until it holds its
	// queues (a probe message arrives) before the measured sends. A topic
	// auto-created by a send reaches the name server with the broker's
	// next registration (up to 30 s).
	probeDeadline := time.Now().Add(60 * time.Second)
	for probes.Load() == 0 && time.Now().Before(probeDeadline) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _ = r.p.SendSync(sctx, client.NewMessage(topic, body).SetProperty("LabSentNs", strconv.FormatInt(time.Now().UnixNano(), 10)))
		cancel()
		time.Sleep(200 * time.Millisecond) // probe pacing while the consumer rebalances
	}
	require.Positive(t, probes.Load(), "%s: the push consumer received nothing within 60 s", r.transport)
	cur := &recorder{start: time.Now()}
	rec.Store(cur)

	var sent atomic.Int64
	var sendErrs atomic.Int64
	deadline := cur.start.Add(dur)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				m := client.NewMessage(topic, body).SetProperty("LabSentNs", strconv.FormatInt(time.Now().UnixNano(), 10))
				sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := r.p.SendSync(sctx, m)
				cancel()
				if err != nil {
					sendErrs.Add(1)
					continue
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	for end := time.Now().Add(10 * time.Second); got.Load() < sent.Load() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond) // waiting for the stragglers, bounded
	}
	res := cur.result()
	res.rate = float64(got.Load()) / dur.Seconds()
	res.errs = sendErrs.Load() + max(0, sent.Load()-got.Load())
	return res
}

// fairBody is the size of a fairness run's messages: big enough that the
// flows are bulk transfers, small enough to stay under the send window.
// The bytes are random: the client compresses bodies above 4 KiB, and a
// body of zeros would cross the link as a few hundred bytes.
const fairBody = 16 << 10

// fairShare runs two bulk flows at once over the emulated link for dur:
// each rig sends fairBody-byte messages asynchronously, at most 32 in
// flight, to the same topic. It returns each flow's goodput (bytes
// acknowledged per second) and its failed sends.
func fairShare(a, b *rig, topic string, dur time.Duration) (bpsA, bpsB float64, errsA, errsB int64) {
	body := make([]byte, fairBody)
	rand.Read(body) //nolint:errcheck // never fails (crypto/rand)
	var ra, rb result
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ra = sendAsync(a.p, topic, body, 32, dur) }()
	go func() { defer wg.Done(); rb = sendAsync(b.p, topic, body, 32, dur) }()
	wg.Wait()
	return ra.rate * fairBody, rb.rate * fairBody, ra.errs, rb.errs
}
