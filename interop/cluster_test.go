package interop

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// node is one `mq namesrv` or `mq broker` process of a cluster test, on a
// fixed loopback port so that it can be killed and started again.
type node struct {
	t     *testing.T
	name  string
	addr  string
	args  []string
	ready func() error

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *testserver.Output
}

func loopbackAddr(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
}

// startNamesrv starts `mq namesrv` on a free port.
func startNamesrv(t *testing.T, name string) *node {
	addr := loopbackAddr(t)
	n := &node{t: t, name: name, addr: addr, logs: &testserver.Output{},
		args: []string{"namesrv", "--set", "namesrv.listen=" + addr, "--set", "log.level=info"}}
	n.ready = func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	n.start()
	return n
}

// startBroker starts `mq broker` registered with every name server; sets
// are extra --set key=value flags.
func startBroker(t *testing.T, name string, nss []*node, sets ...string) *node {
	addr := loopbackAddr(t)
	dir := t.TempDir()
	var list []string
	for _, ns := range nss {
		list = append(list, ns.addr)
	}
	args := []string{"broker",
		"--set", "broker.listen=" + addr,
		"--set", "broker.namesrv=" + strings.Join(list, ","),
		"--set", "broker.register_interval=1s",
		"--set", "storage.dir=" + filepath.Join(dir, "store"),
		"--set", "log.level=info",
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	n := &node{t: t, name: name, addr: addr, args: args, logs: &testserver.Output{}}
	n.ready = func() error {
		// Registered with at least one name server that is up.
		var last error
		for _, ns := range nss {
			if !ns.running() {
				continue
			}
			if last = routeHas(ns.addr, "TBW102", addr); last == nil {
				return nil
			}
		}
		if last == nil {
			last = fmt.Errorf("no name server up")
		}
		return last
	}
	n.start()
	return n
}

// routeHas checks that the name server's route of topic names addr.
func routeHas(ns, topic, addr string) error {
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
	switch {
	case err != nil:
		return err
	case resp.Code != remoting.Success:
		return fmt.Errorf("route %s: code %d", topic, resp.Code)
	case !bytes.Contains(resp.Body, []byte(addr)):
		return fmt.Errorf("route %s lacks %s: %s", topic, addr, resp.Body)
	}
	return nil
}

func (n *node) start() {
	n.t.Helper()
	cmd := exec.Command(testserver.Binary(n.t), n.args...)
	cmd.Dir = n.t.TempDir()
	cmd.Env = os.Environ()
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	require.NoError(n.t, cmd.Start(), "start %s", n.name)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	n.t.Cleanup(func() {
		n.kill()
		if n.t.Failed() {
			n.t.Logf("%s log tail:\n%s", n.name, n.logs.Tail(40))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			n.t.Fatalf("%s exited:\n%s", n.name, n.logs.Tail(60))
		default:
		}
		if err = n.ready(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.t.Fatalf("%s not ready: %v\n%s", n.name, err, n.logs.Tail(60))
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *node) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

func nsAddrs(nss ...*node) []string {
	out := make([]string, len(nss))
	for i, n := range nss {
		out[i] = n.addr
	}
	return out
}

// ledger counts acknowledged and consumed messages by body.
type ledger struct {
	mu       sync.Mutex
	acked    map[string]bool
	consumed map[string]int
}

func newLedger() *ledger { return &ledger{acked: map[string]bool{}, consumed: map[string]int{}} }

func (l *ledger) ack(body string) {
	l.mu.Lock()
	l.acked[body] = true
	l.mu.Unlock()
}

func (l *ledger) consume(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	l.mu.Lock()
	for _, m := range msgs {
		l.consumed[string(m.Body)]++
	}
	l.mu.Unlock()
	return consumer.ConsumeSuccess, nil
}

// missing lists acknowledged messages not consumed yet.
func (l *ledger) missing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for b := range l.acked {
		if l.consumed[b] == 0 {
			out = append(out, b)
		}
	}
	return out
}

func (l *ledger) counts() (acked, consumed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.consumed)
}

// produceLoop sends numbered messages until stop is closed, recording
// every acknowledged one; it returns how many sends failed.
func produceLoop(t *testing.T, p rocketmq.Producer, topic, prefix string, l *ledger, stop <-chan struct{}, wg *sync.WaitGroup, failed *atomic.Int64) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf("%s-%06d", prefix, i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
			cancel()
			if err != nil || res.Status != primitive.SendOK {
				failed.Add(1)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			l.ack(body)
			time.Sleep(2 * time.Millisecond)
		}
	}()
}

// startLedgerConsumer starts an official push consumer of a new group on
// topic (clustering, from the first offset, all tags) that records into
// l, with extra options after those; it shuts down when the test ends.
func startLedgerConsumer(t *testing.T, nss []*node, topic string, l *ledger, extra ...consumer.Option) {
	t.Helper()
	require.NoError(t, tryLedgerConsumer(t, nss, topic, l, extra...))
}

// tryLedgerConsumer is startLedgerConsumer returning Start's error (the
// official consumer shuts itself down when Start fails).
func tryLedgerConsumer(t *testing.T, nss []*node, topic string, l *ledger, extra ...consumer.Option) error {
	t.Helper()
	opts := append([]consumer.Option{
		consumer.WithNameServer(nsAddrs(nss...)),
		consumer.WithGroupName(uniq("CG")), consumer.WithInstance(uniq("ci")),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, extra...)
	c, err := rocketmq.NewPushConsumer(opts...)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, l.consume))
	if err := c.Start(); err != nil {
		return err
	}
	t.Cleanup(func() { c.Shutdown() })
	return nil
}

func waitConsumed(t *testing.T, l *ledger, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if len(l.missing()) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	miss := l.missing()
	acked, consumed := l.counts()
	t.Fatalf("%d of %d acknowledged messages never consumed (%d consumed), e.g. %v", len(miss), acked, consumed, miss[:min(5, len(miss))])
}

// TestClusterTwoNameServers: a broker registers with two name servers; the
// official producer and push consumer, given both addresses, keep working
// while one name server is SIGKILLed and after it returns.
func TestClusterTwoNameServers(t *testing.T) {
	ns1 := startNamesrv(t, "namesrv-1")
	ns2 := startNamesrv(t, "namesrv-2")
	br := startBroker(t, "broker-a", []*node{ns1, ns2})
	// Registered with both.
	for _, ns := range []*node{ns1, ns2} {
		require.Eventually(t, func() bool { return routeHas(ns.addr, "TBW102", br.addr) == nil }, 15*time.Second, 50*time.Millisecond)
	}

	topic := uniq("ClusterNS")
	p, err := rocketmq.NewProducer(
		producer.WithNameServer(nsAddrs(ns1, ns2)),
		producer.WithGroupName(uniq("PG")), producer.WithInstanceName(uniq("pi")),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Shutdown() })
	sendSync(t, p, newMsg(topic, "warmup"))
	for _, ns := range []*node{ns1, ns2} {
		require.Eventually(t, func() bool { return routeHas(ns.addr, topic, br.addr) == nil }, 15*time.Second, 50*time.Millisecond)
	}

	l := newLedger()
	l.ack("warmup")
	startLedgerConsumer(t, []*node{ns1, ns2}, topic, l)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	produceLoop(t, p, topic, "ns", l, stop, &wg, &failed)
	phase := 2 * time.Second
	if testing.Short() {
		phase = time.Second
	}
	time.Sleep(phase)
	ns1.kill()
	t.Log("namesrv-1 killed")
	time.Sleep(2 * phase)
	// A new producer, created while one name server is down, still finds
	// its route through the other.
	p2, err := rocketmq.NewProducer(
		producer.WithNameServer(nsAddrs(ns1, ns2)),
		producer.WithGroupName(uniq("PG")), producer.WithInstanceName(uniq("pi")),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, p2.Start())
	t.Cleanup(func() { p2.Shutdown() })
	for i := 0; i < 10; i++ {
		body := fmt.Sprintf("p2-%d", i)
		sendSync(t, p2, newMsg(topic, body))
		l.ack(body)
	}
	ns1.start()
	t.Log("namesrv-1 restarted")
	require.Eventually(t, func() bool { return routeHas(ns1.addr, topic, br.addr) == nil }, 15*time.Second, 50*time.Millisecond,
		"the restarted name server learns the routes again from the broker's registration")
	ns2.kill()
	t.Log("namesrv-2 killed")
	time.Sleep(2 * phase)
	close(stop)
	wg.Wait()
	acked, _ := l.counts()
	t.Logf("acknowledged %d, failed sends %d", acked, failed.Load())
	require.Greater(t, acked, 50)
	waitConsumed(t, l, 60*time.Second)
}

// total counts deliveries (duplicates included).
func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.consumed {
		n += c
	}
	return n
}

// startGroup starts a master and its slave (same broker.name, id 1)
// registered with nss.
func startGroup(t *testing.T, name, role string, nss []*node, sets ...string) (master, slave *node) {
	common := append([]string{"broker.name=" + name, "ha.meta_interval=1s", "ha.lag_log_interval=1s", "ha.max_wait=500ms"}, sets...)
	master = startBroker(t, name+"-master", nss, append([]string{"broker.role=" + role}, common...)...)
	slave = startBroker(t, name+"-slave", nss, append([]string{"broker.id=1", "broker.role=SLAVE"}, common...)...)
	require.Eventually(t, func() bool { return strings.Contains(slave.logs.Tail(400), "following master") }, 20*time.Second, 50*time.Millisecond,
		"the slave follows its master")
	return master, slave
}

// TestClusterReplicationSyncMaster: two name servers and a SYNC_MASTER
// with its slave. Producers and a (rate-limited, so always behind)
// consumer run throughout while a name server, the slave and the master
// are SIGKILLed and restarted in turn. No acknowledged message is lost,
// every one is consumed, and consumption goes on from the slave while the
// master is down.
func TestClusterReplicationSyncMaster(t *testing.T) {
	ns1 := startNamesrv(t, "namesrv-1")
	ns2 := startNamesrv(t, "namesrv-2")
	nss := []*node{ns1, ns2}
	bname := uniq("bg")
	master, slave := startGroup(t, bname, "SYNC_MASTER", nss)

	topic := uniq("ClusterSync")
	p, err := rocketmq.NewProducer(
		producer.WithNameServer(nsAddrs(nss...)),
		producer.WithGroupName(uniq("PG")), producer.WithInstanceName(uniq("pi")),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Shutdown() })
	sendSync(t, p, newMsg(topic, "warmup"))
	for _, ns := range nss {
		require.Eventually(t, func() bool { return routeHas(ns.addr, topic, slave.addr) == nil }, 15*time.Second, 50*time.Millisecond)
	}

	l := newLedger()
	l.ack("warmup")
	// Slow enough that the consumer falls behind even when a loaded CI
	// machine acknowledges only ~100 SYNC_MASTER sends a second.
	tps := int32(60)
	startLedgerConsumer(t, nss, topic, l,
		consumer.WithConsumeTPS(tps), consumer.WithPullThresholdForQueue(64), consumer.WithPullBatchSize(16))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 2; i++ {
		produceLoop(t, p, topic, fmt.Sprintf("s%d", i), l, stop, &wg, &failed)
	}
	phase := 3 * time.Second
	if testing.Short() {
		phase = 1500 * time.Millisecond
	}
	time.Sleep(phase)

	ns1.kill()
	t.Log("namesrv-1 killed")
	time.Sleep(phase)
	ns1.start()
	t.Log("namesrv-1 restarted")
	time.Sleep(phase)

	slave.kill()
	before := failed.Load()
	t.Log("slave killed")
	time.Sleep(phase)
	t.Logf("sends not acknowledged while the slave was down (SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT): %d", failed.Load()-before)
	slave.start()
	t.Log("slave restarted")
	require.Eventually(t, func() bool { return strings.Contains(slave.logs.Tail(400), "following master") }, 20*time.Second, 50*time.Millisecond)
	time.Sleep(phase)

	// Let the (rate-limited) consumer fall behind before the master dies,
	// however fast this machine produces right now.
	require.Eventually(t, func() bool { a, _ := l.counts(); return a-l.total() > 120 }, 30*time.Second, 20*time.Millisecond,
		"the consumer falls behind the producers")
	acked, _ := l.counts()
	consumedBefore := l.total()
	t.Logf("before the master is killed: %d acknowledged, %d consumed", acked, consumedBefore)
	master.kill()
	t.Log("master killed")
	// The official client refreshes routes every 30 s; until then it pulls
	// from the dead master and then falls back to the slave.
	backlog := acked - consumedBefore
	require.Greater(t, backlog, 100, "the consumer is behind when the master dies")
	require.Eventually(t, func() bool { return l.total() >= consumedBefore+backlog/2 }, 60*time.Second, 100*time.Millisecond,
		"consumption goes on from the slave while the master is down (backlog %d)", backlog)
	t.Logf("consumed from the slave while the master was down: %d", l.total()-consumedBefore)
	master.start()
	t.Log("master restarted")
	ackedDown, _ := l.counts()
	require.Eventually(t, func() bool { a, _ := l.counts(); return a > ackedDown+100 }, 60*time.Second, 100*time.Millisecond,
		"producers go on with the restarted master (after their route refresh)")
	time.Sleep(phase)
	close(stop)
	wg.Wait()
	acked, _ = l.counts()
	t.Logf("acknowledged %d, not acknowledged %d", acked, failed.Load())
	waitConsumed(t, l, 120*time.Second)
}

// maxOffsets asks a broker for the next offset of each queue of topic.
func maxOffsets(t *testing.T, addr, topic string, queues int) []int64 {
	t.Helper()
	c := rawClient(t)
	out := make([]int64, queues)
	for q := range out {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": fmt.Sprint(q)}, nil))
		cancel()
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		fmt.Sscan(resp.Ext("offset"), &out[q])
	}
	return out
}

// lastLag is the last lag the slave logged.
func lastLag(n *node) (int64, bool) {
	lines := strings.Split(n.logs.Tail(2000), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.Contains(lines[i], "replication lag") {
			continue
		}
		_, rest, ok := strings.Cut(lines[i], "lag_bytes=")
		if !ok {
			continue
		}
		var v int64
		if _, err := fmt.Sscan(rest, &v); err == nil {
			return v, true
		}
	}
	return 0, false
}

// TestClusterReplicationAsyncMaster: with ASYNC_MASTER, what the slave
// lacks when the master is SIGKILLed is a tail of the acknowledged
// messages (no holes) whose size is of the order of the reported lag;
// the restarted master still has everything (its page cache survived)
// and every acknowledged message is consumed.
func TestClusterReplicationAsyncMaster(t *testing.T) {
	ns1 := startNamesrv(t, "namesrv-1")
	ns2 := startNamesrv(t, "namesrv-2")
	nss := []*node{ns1, ns2}
	bname := uniq("bg")
	master, slave := startGroup(t, bname, "ASYNC_MASTER", nss, "ha.lag_log_interval=100ms")

	topic := uniq("ClusterAsync")
	p, err := rocketmq.NewProducer(
		producer.WithNameServer(nsAddrs(nss...)),
		producer.WithGroupName(uniq("PG")), producer.WithInstanceName(uniq("pi")),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Shutdown() })
	sendSync(t, p, newMsg(topic, "warmup"))
	awaitRoute(t, ns1.addr, topic)

	type ackd struct {
		queue int
		off   int64
	}
	var mu sync.Mutex
	acks := map[string]ackd{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	body := strings.Repeat("p", 512)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b := fmt.Sprintf("a%d-%06d-%s", g, i, body)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(b)))
				cancel()
				if err != nil || res.Status != primitive.SendOK {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				acks[b] = ackd{queue: res.MessageQueue.QueueId, off: res.QueueOffset}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(3 * time.Second)
	lag, logged := lastLag(slave)
	master.kill()
	t.Log("master killed")
	slaveMax := maxOffsets(t, slave.addr, topic, 4)
	mu.Lock()
	atRisk, total := 0, len(acks)
	perQueueMax := make([]int64, 4)
	for _, a := range acks {
		if a.off >= slaveMax[a.queue] {
			atRisk++
		}
		perQueueMax[a.queue] = max(perQueueMax[a.queue], a.off+1)
	}
	mu.Unlock()
	for q := range slaveMax {
		// Every acknowledged offset below the slave's max is there: what is
		// missing is a tail.
		assert.LessOrEqual(t, slaveMax[q], perQueueMax[q]+1, "queue %d", q)
	}
	recBytes := int64(len(body) + 200)
	t.Logf("ASYNC_MASTER killed: %d acknowledged, %d not yet on the slave (~%d bytes); last lag the slave reported: %d bytes (logged %v)",
		total, atRisk, int64(atRisk)*recBytes, lag, logged)
	close(stop)
	wg.Wait()
	master.start()
	t.Log("master restarted")

	// Every acknowledged message is there after the master's restart.
	l := newLedger()
	mu.Lock()
	for b := range acks {
		l.ack(b)
	}
	mu.Unlock()
	startLedgerConsumer(t, nss, topic, l)
	waitConsumed(t, l, 90*time.Second)
	require.Eventually(t, func() bool {
		a, b := maxOffsets(t, master.addr, topic, 4), maxOffsets(t, slave.addr, topic, 4)
		return fmt.Sprint(a) == fmt.Sprint(b)
	}, 30*time.Second, 100*time.Millisecond, "the slave catches up with the restarted master")
}
