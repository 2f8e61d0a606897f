package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// startControllerNamesrvs starts n `mq namesrv` processes, each running a
// failover controller, in one raft cluster.
func startControllerNamesrvs(t *testing.T, n int) []*node {
	var raftAddrs []string
	for range n {
		raftAddrs = append(raftAddrs, loopbackAddr(t))
	}
	var nss []*node
	for i := range n {
		addr := loopbackAddr(t)
		dir := t.TempDir()
		nd := &node{t: t, name: fmt.Sprintf("namesrv-%d", i+1), addr: addr, logs: &testserver.Output{},
			args: []string{"namesrv", "--set", "namesrv.listen=" + addr, "--set", "log.level=info",
				"--set", "namesrv.controller.enabled=true",
				"--set", "namesrv.controller.listen=" + raftAddrs[i],
				"--set", "namesrv.controller.peers=" + strings.Join(raftAddrs, ","),
				"--set", "namesrv.controller.data_dir=" + filepath.Join(dir, "controller"),
				"--set", "namesrv.controller.raft_timeout=500ms",
				"--set", "namesrv.controller.check_interval=100ms",
			}}
		nd.ready = startNamesrvReady(addr)
		nd.start()
		nss = append(nss, nd)
	}
	return nss
}

func startNamesrvReady(addr string) func() error {
	return func() error {
		c := rawClientNoT()
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		return err
	}
}

func dialTCP(ctx context.Context, addr string) (transport.Conn, error) {
	return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
}

func rawClientNoT() *remoting.Client {
	return remoting.NewClient(dialTCP, nil, nil, remoting.PeerOptions{})
}

// masterViews asks every name server for the master (id 0) of bname:
// one entry per name server that answered ("" when it shows none).
func masterViews(c *remoting.Client, nss []*node, bname string) []string {
	var out []string
	for _, ns := range nss {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		resp, err := c.Invoke(ctx, ns.addr, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		cancel()
		if err != nil || resp.Code != remoting.Success {
			continue
		}
		var ci protocol.ClusterInfo
		if json.Unmarshal(resp.Body, &ci) != nil {
			continue
		}
		m := ""
		if bd := ci.BrokerAddrTable[bname]; bd != nil {
			m = bd.BrokerAddrs[protocol.MasterID]
		}
		out = append(out, m)
	}
	return out
}

// masterWatch polls every name server's view throughout and records
// every round in which two different masters of bname were shown.
type masterWatch struct {
	mu      sync.Mutex
	rounds  int
	doubles []string
	seen    map[string]time.Time // master address → first round showing it on every name server
	last    []string             // the last round's views
	history []string             // every change of a name server's view, for failure logs
	stop    chan struct{}
	done    chan struct{}
}

func watchMasters(t *testing.T, nss []*node, bname string) *masterWatch {
	w := &masterWatch{seen: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	c := rawClientNoT()
	go func() {
		defer close(w.done)
		defer c.Close()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tk.C:
			}
			views := masterViews(c, nss, bname)
			distinct := map[string]bool{}
			for _, m := range views {
				if m != "" {
					distinct[m] = true
				}
			}
			w.mu.Lock()
			w.rounds++
			if fmt.Sprint(views) != fmt.Sprint(w.last) {
				w.history = append(w.history, time.Now().Format("15:04:05.000")+" "+fmt.Sprint(views))
				w.last = views
			}
			if len(distinct) > 1 {
				w.doubles = append(w.doubles, fmt.Sprint(views))
			}
			if len(views) == len(nss) && len(distinct) == 1 && !slices.Contains(views, "") {
				if _, ok := w.seen[views[0]]; !ok {
					w.seen[views[0]] = time.Now()
				}
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.close()
		if t.Failed() {
			w.mu.Lock()
			t.Logf("name-server views of the master of %s:\n%s", bname, strings.Join(w.history, "\n"))
			w.mu.Unlock()
		}
	})
	return w
}

func (w *masterWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// shownAt is when every name server first showed addr as the master.
func (w *masterWatch) shownAt(addr string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.seen[addr]
	return at, ok
}

func (n *node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.cmd.Process.Signal(sig)
	}
}

// brokerHasTopic asks a broker's topic table (GET_ALL_TOPIC_CONFIG).
func brokerHasTopic(c *remoting.Client, addr, topic string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.GetAllTopicConfig, nil, nil))
	if err != nil || resp.Code != remoting.Success {
		return false
	}
	var w protocol.TopicConfigWrapper
	return json.Unmarshal(resp.Body, &w) == nil && w.TopicConfigTable[topic] != nil
}

// TestFailover: three name servers running the failover controller, a
// SYNC_MASTER and two slaves under ha.failover, official producers
// sending throughout. The slaves are paused for a moment so that the
// master holds records no slave has, then the master is SIGKILLed: a slave
// is promoted within the failover timeout, producers continue on it, and
// no name server ever shows two masters. The old master, restarted, learns
// it is no longer master, truncates what the new master lacks, rejoins as
// a slave and catches up; every acknowledged message is consumed.
func TestFailover(t *testing.T) {
	nss := startControllerNamesrvs(t, 3)
	bname := uniq("fo")
	const failoverTimeout = 3 * time.Second
	common := []string{"broker.name=" + bname, "ha.failover=true", "ha.failover_timeout=" + failoverTimeout.String(),
		"ha.heartbeat_interval=300ms", "ha.meta_interval=1s", "ha.lag_log_interval=1s", "ha.max_wait=500ms", "ha.sync_timeout=2s"}
	master := startBroker(t, bname+"-master", nss, append([]string{"broker.role=SYNC_MASTER"}, common...)...)
	watch := watchMasters(t, nss, bname)
	slaves := []*node{
		startBroker(t, bname+"-slave1", nss, append([]string{"broker.id=1", "broker.role=SLAVE"}, common...)...),
		startBroker(t, bname+"-slave2", nss, append([]string{"broker.id=2", "broker.role=SLAVE"}, common...)...),
	}
	for _, s := range slaves {
		require.Eventually(t, func() bool { return strings.Contains(s.logs.Tail(400), "following master") }, 20*time.Second, 50*time.Millisecond,
			"%s follows the master", s.name)
	}

	topic := uniq("Failover")
	newProducer := func() rocketmq.Producer {
		p, err := rocketmq.NewProducer(
			producer.WithNameServer(nsAddrs(nss...)),
			producer.WithGroupName(uniq("PG")), producer.WithInstanceName(uniq("pi")),
			producer.WithRetry(2), producer.WithSendMsgTimeout(3*time.Second))
		require.NoError(t, err)
		require.NoError(t, p.Start())
		t.Cleanup(func() { p.Shutdown() })
		return p
	}
	p := newProducer()
	l := newLedger()
	sendSync(t, p, newMsg(topic, "warmup"))
	l.ack("warmup")
	rc := rawClientNoT()
	defer rc.Close()
	for _, s := range slaves {
		require.Eventually(t, func() bool { return brokerHasTopic(rc, s.addr, topic) }, 15*time.Second, 50*time.Millisecond,
			"%s copied the topic config", s.name)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 2 {
		produceLoop(t, p, topic, fmt.Sprintf("a%d", i), l, stop, &wg, &failed)
	}
	time.Sleep(2 * time.Second)
	ackedBefore, _ := l.counts()
	require.Positive(t, ackedBefore)

	// Pause the slaves: the master writes records it cannot replicate
	// (the sends wait for an acknowledgement that never comes). The first
	// write after the pause still reaches them: it answers the HA_PULL
	// each slave had waiting, into its socket buffer. So wait until both
	// producers were answered FLUSH_SLAVE_TIMEOUT (ha.sync_timeout): the
	// sends after that are written with no pull waiting.
	failedBefore := failed.Load()
	for _, s := range slaves {
		s.signal(syscall.SIGSTOP)
	}
	require.Eventually(t, func() bool { return failed.Load() >= failedBefore+2 }, 10*time.Second, 10*time.Millisecond,
		"sends time out waiting for the paused slaves")
	time.Sleep(300 * time.Millisecond)
	master.kill()
	killed := time.Now()
	for _, s := range slaves {
		s.signal(syscall.SIGCONT)
	}
	t.Logf("master killed after %d acknowledged messages", ackedBefore)

	var newMaster *node
	require.Eventually(t, func() bool {
		for _, s := range slaves {
			if _, ok := watch.shownAt(s.addr); ok {
				newMaster = s
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "a slave is promoted and every name server shows it")
	at, _ := watch.shownAt(newMaster.addr)
	took := at.Sub(killed)
	t.Logf("FAILOVER: %s is master on every name server %s after the kill (ha.failover_timeout %s)", newMaster.name, took.Round(time.Millisecond), failoverTimeout)
	assert.Less(t, took, 10*time.Second, "promotion within the 10 s target")
	assert.Greater(t, took, failoverTimeout-500*time.Millisecond, "not before the failover timeout")

	// A producer created now sends to the new master at once; the old one
	// follows after its route refresh (the official client polls every 30 s).
	// Until the remaining slave follows the new SYNC_MASTER, sends are
	// stored but answered SLAVE_NOT_AVAILABLE (not acknowledged).
	p2 := newProducer()
	p2At := time.Now()
	deadline := time.Now().Add(20 * time.Second)
	var lastErr string
	var errs []string
	for sent := 0; sent < 10; {
		if !time.Now().Before(deadline) {
			for _, ns := range nss {
				t.Logf("route of %s at %s: %s", topic, ns.name, topicRoute(rc, ns.addr, topic))
			}
			require.Fail(t, "a new producer gets 10 sends acknowledged by the new master within 20 s", "p2 created %s; errors: %s; last: %s",
				p2At.Format("15:04:05.000"), strings.Join(errs, " | "), lastErr)
		}
		body := fmt.Sprintf("fresh-%d", sent)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		res, err := p2.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
		cancel()
		if err != nil || res.Status != primitive.SendOK {
			lastErr = fmt.Sprint(err)
			if err == nil {
				lastErr = res.String()
			}
			if len(errs) < 5 && (len(errs) == 0 || !strings.HasSuffix(errs[len(errs)-1], lastErr)) {
				errs = append(errs, time.Now().Format("15:04:05.000")+" "+lastErr)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if sent == 0 {
			t.Logf("FAILOVER: first acknowledged send on the new master %s after the kill", time.Since(killed).Round(time.Millisecond))
		}
		l.ack(body)
		sent++
	}
	produceLoop(t, p2, topic, "b", l, stop, &wg, &failed)

	// The old master comes back: it is no longer master, cuts what the new
	// master lacks and follows it.
	master.start()
	require.Eventually(t, func() bool { return strings.Contains(master.logs.Tail(2000), "truncated the commit log") }, 30*time.Second, 50*time.Millisecond,
		"the old master truncates its commit log")
	require.Eventually(t, func() bool { return strings.Contains(master.logs.Tail(2000), "following master") }, 30*time.Second, 50*time.Millisecond,
		"the old master follows the new one")
	cutLine := grepLine(master.logs.Tail(4000), "holds records the new master lacks")
	assert.NotEmpty(t, cutLine, "the old master had records no slave had (written while the slaves were paused)")
	t.Logf("old master: %s", cutLine)

	ackedOld := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for b := range l.acked {
			if strings.HasPrefix(b, "a") {
				n++
			}
		}
		return n
	}
	n0 := ackedOld()
	require.Eventually(t, func() bool { return ackedOld() > n0+20 }, 45*time.Second, 100*time.Millisecond,
		"the producer created before the failover continues on the new master")
	t.Logf("FAILOVER: the producer created before the kill acknowledged again %s after it (its 30 s route refresh)", time.Since(killed).Round(time.Second))
	close(stop)
	wg.Wait()
	acked, _ := l.counts()
	t.Logf("acknowledged %d, not acknowledged %d", acked, failed.Load())

	require.Eventually(t, func() bool {
		a, b := maxOffsets(t, newMaster.addr, topic, 4), maxOffsets(t, master.addr, topic, 4)
		return fmt.Sprint(a) == fmt.Sprint(b)
	}, 30*time.Second, 100*time.Millisecond, "the old master catches up with the new one")

	startLedgerConsumer(t, nss, topic, l)
	waitConsumed(t, l, 60*time.Second)

	watch.close()
	watch.mu.Lock()
	defer watch.mu.Unlock()
	t.Logf("name-server views polled %d times", watch.rounds)
	assert.Empty(t, watch.doubles, "never two masters for one broker name in the name servers' views")
}

func grepLine(s, sub string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// topicRoute is a name server's GET_ROUTEINFO_BY_TOPIC answer, for logs.
func topicRoute(c *remoting.Client, ns, topic string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("code %d %s %s", resp.Code, resp.Remark, resp.Body)
}
