//go:build linux

package interop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// The partition suite (issue 30): three name servers with controllers, a
// SYNC_MASTER and two slaves under ha.failover, each process in its own
// network namespace on a bridge; partitions are routes through a gateway
// that does not exist (packets are silently dropped, like an iptables
// DROP rule, both ways). The test process (clients, watchers) sits on
// the bridge's own address and always reaches every node, so a fenced
// master stays reachable to producers: it must not acknowledge.

// labNode indices.
const (
	labNS0 = iota
	labNS1
	labNS2
	labB0 // the configured master
	labB1
	labB2
	labNodes
)

// netLab is the namespaces, the bridge and the partitions.
type netLab struct {
	t      *testing.T
	prefix string
	subnet string // "10.x.y"
	ns     []string
	ips    []string
	dead   string // on-link address nobody holds: the partition gateway

	mu    sync.Mutex
	cuts  map[[2]int]bool // ordered pairs (from, to); to = -1: the host
	procs []*labProc
}

// newNetLab makes n namespaces on a fresh bridge; it skips the test when
// that is impossible (not root, no ip(8), no netns support).
func newNetLab(t *testing.T, n int) *netLab {
	if os.Geteuid() != 0 {
		t.Skip("partition suite: needs root (network namespaces and routes), as in CI")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("partition suite: ip(8) (iproute2) is not installed")
	}
	var rb [3]byte
	rand.Read(rb[:])
	l := &netLab{t: t, prefix: "qp" + hex.EncodeToString(rb[:2]), cuts: map[[2]int]bool{}}
	l.subnet = fmt.Sprintf("10.%d.%d", 200+int(rb[2])%50, rb[0])
	l.dead = l.subnet + ".250"
	br := l.prefix + "br"
	if out, err := exec.Command("ip", "netns", "add", l.prefix+"-probe").CombinedOutput(); err != nil {
		t.Skipf("partition suite: cannot create a network namespace: %v %s", err, out)
	}
	exec.Command("ip", "netns", "del", l.prefix+"-probe").Run()
	t.Cleanup(l.teardown)
	l.ip("link", "add", br, "type", "bridge")
	l.ip("addr", "add", l.subnet+".254/24", "dev", br)
	l.ip("link", "set", br, "up")
	for i := range n {
		name := fmt.Sprintf("%s-%d", l.prefix, i)
		host, in := fmt.Sprintf("%sh%d", l.prefix, i), fmt.Sprintf("%sn%d", l.prefix, i)
		ip := fmt.Sprintf("%s.%d", l.subnet, i+1)
		l.ip("netns", "add", name)
		l.ns, l.ips = append(l.ns, name), append(l.ips, ip)
		l.ip("link", "add", host, "type", "veth", "peer", "name", in)
		l.ip("link", "set", in, "netns", name)
		l.ip("link", "set", host, "master", br)
		l.ip("link", "set", host, "up")
		l.in(i, "link", "set", "lo", "up")
		l.in(i, "addr", "add", ip+"/24", "dev", in)
		l.in(i, "link", "set", in, "up")
	}
	return l
}

func (l *netLab) hostIP() string { return l.subnet + ".254" }

func (l *netLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

func (l *netLab) in(i int, args ...string) {
	l.t.Helper()
	l.ip(append([]string{"-n", l.ns[i]}, args...)...)
}

// teardown kills the processes and removes the namespaces and the
// bridge (their veths go with them).
func (l *netLab) teardown() {
	l.mu.Lock()
	procs := l.procs
	l.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, ns := range l.ns {
		exec.Command("ip", "netns", "del", ns).Run()
	}
	exec.Command("ip", "link", "del", l.prefix+"br").Run()
}

// cut drops every packet between a and b (b = -1: the test's host side,
// from a only: a cannot answer it).
func (l *netLab) cut(a, b int) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cutLocked(a, b)
	if b >= 0 {
		l.cutLocked(b, a)
	}
}

func (l *netLab) cutLocked(from, to int) {
	if l.cuts[[2]int{from, to}] {
		return
	}
	dst := l.hostIP()
	if to >= 0 {
		dst = l.ips[to]
	}
	l.in(from, "route", "add", dst+"/32", "via", l.dead)
	l.cuts[[2]int{from, to}] = true
}

// isolate cuts a from every other node and from the host.
func (l *netLab) isolate(a int) {
	for b := range l.ns {
		if b != a {
			l.cut(a, b)
		}
	}
	l.cut(a, -1)
}

// split cuts every node of side from every node not in it.
func (l *netLab) split(side ...int) {
	for a := range l.ns {
		for b := range l.ns {
			if slices.Contains(side, a) && !slices.Contains(side, b) {
				l.cut(a, b)
			}
		}
	}
}

// heal removes every cut.
func (l *netLab) heal() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.cuts {
		dst := l.hostIP()
		if k[1] >= 0 {
			dst = l.ips[k[1]]
		}
		l.in(k[0], "route", "del", dst+"/32", "via", l.dead)
		delete(l.cuts, k)
	}
}

// labProc is an mq process inside a namespace.
type labProc struct {
	name, addr string
	logs       *testserver.Output
	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
}

func (l *netLab) start(i int, name, addr string, args []string, ready func() error) *labProc {
	l.t.Helper()
	p := &labProc{name: name, addr: addr, logs: &testserver.Output{}}
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.ns[i], testserver.Binary(l.t)}, args...)...)
	cmd.Dir = l.t.TempDir()
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	require.NoError(l.t, cmd.Start(), "start %s", name)
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(p.done) }()
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	l.t.Cleanup(func() {
		if l.t.Failed() {
			l.t.Logf("%s log tail:\n%s", name, p.logs.Tail(60))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			l.t.Fatalf("%s exited:\n%s", name, p.logs.Tail(60))
		default:
		}
		err := ready()
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s not ready: %v\n%s", name, err, p.logs.Tail(60))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *labProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		<-p.done
		p.cmd = nil
	}
}

// labGroup is what the controllers committed for the broker name, as
// the name servers answer a probe heartbeat.
type labGroup struct {
	Epoch      int64   `json:"epoch"`
	MasterAddr string  `json:"masterAddr"`
	InSync     []int64 `json:"inSync"`
	Epochs     []struct {
		Epoch int64 `json:"epoch"`
		Start int64 `json:"start"`
	} `json:"epochs"`
}

func (g labGroup) ready() bool {
	for _, e := range g.Epochs {
		if e.Epoch == g.Epoch {
			return e.Start >= 0
		}
	}
	return false
}

// labWatch polls, every 50 ms, the controllers' committed group (a probe
// heartbeat to every name server: the highest epoch answered) and every
// name server's master of the broker name (GET_BROKER_CLUSTER_INFO), and
// counts polls showing a deposed master (neither the committed master
// read just before nor just after) and rounds showing two masters.
type labWatch struct {
	nss   []string
	bname string
	c     *remoting.Client

	mu       sync.Mutex
	polls    int
	deposed  []string
	doubles  []string
	cur      labGroup
	leader   int                  // name server whose controller is the raft leader (-1: none answered so)
	views    []string             // the last poll's masters, per name server
	history  []string             // changes, for failure logs
	since    []labTerm            // masters in order, with when they were first committed as seen here
	shown    map[string]time.Time // master address → first poll showing it on any name server (per term: reset on change)
	withheld []int                // per name server: polls that answered the group without a master
	stop     chan struct{}
	done     chan struct{}
}

type labTerm struct {
	epoch int64
	addr  string
	at    time.Time
}

func watchLab(t *testing.T, nss []string, bname string) *labWatch {
	w := &labWatch{nss: nss, bname: bname, c: rawClientNoT(), leader: -1, shown: map[string]time.Time{},
		withheld: make([]int, len(nss)), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tk.C:
			}
			w.round()
		}
	}()
	t.Cleanup(func() {
		w.close()
		w.c.Close()
		if t.Failed() {
			w.mu.Lock()
			t.Logf("partition watch history:\n%s", strings.Join(w.history, "\n"))
			w.mu.Unlock()
		}
	})
	return w
}

func (w *labWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// committed asks every name server's controller; it returns the group
// with the highest epoch and the index of a name server answering as
// raft leader.
func (w *labWatch) committed() (labGroup, int, bool) {
	body, _ := json.Marshal(map[string]any{"cluster": "DefaultCluster", "name": w.bname, "memberId": 999, "addr": "probe.invalid:1"})
	var best labGroup
	leader, ok := -1, false
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, ns := range w.nss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			resp, err := w.c.Invoke(ctx, ns, remoting.NewRequest(remoting.ControllerHeartbeat, nil, body))
			if err != nil || resp.Code != remoting.Success {
				return
			}
			var v struct {
				Leader bool      `json:"leader"`
				Group  *labGroup `json:"group"`
			}
			if json.Unmarshal(resp.Body, &v) != nil || v.Group == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if v.Leader {
				leader = i
			}
			if !ok || v.Group.Epoch > best.Epoch {
				best, ok = *v.Group, true
			}
		}()
	}
	wg.Wait()
	return best, leader, ok
}

func (w *labWatch) masters() []string {
	out := make([]string, len(w.nss))
	var wg sync.WaitGroup
	for i, ns := range w.nss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = "?"
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			resp, err := w.c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
			if err != nil || resp.Code != remoting.Success {
				return
			}
			var ci protocol.ClusterInfo
			if json.Unmarshal(resp.Body, &ci) != nil {
				return
			}
			out[i] = ""
			if bd := ci.BrokerAddrTable[w.bname]; bd != nil {
				out[i] = bd.BrokerAddrs[protocol.MasterID]
			}
		}()
	}
	wg.Wait()
	return out
}

func (w *labWatch) round() {
	before, leader, ok1 := w.committed()
	views := w.masters()
	after, _, ok2 := w.committed()
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ok1 || !ok2 {
		return
	}
	w.leader = leader
	if after.Epoch > w.cur.Epoch || (after.Epoch == w.cur.Epoch && after.ready() && !w.cur.ready()) || fmt.Sprint(after.InSync) != fmt.Sprint(w.cur.InSync) {
		if after.Epoch > w.cur.Epoch {
			w.since = append(w.since, labTerm{epoch: after.Epoch, addr: after.MasterAddr, at: now})
			w.shown = map[string]time.Time{}
		}
		w.cur = after
		w.history = append(w.history, fmt.Sprintf("%s committed epoch %d master %s ready %v in-sync %v", now.Format("15:04:05.000"),
			after.Epoch, after.MasterAddr, after.ready(), after.InSync))
	}
	distinct := map[string]bool{}
	for i, m := range views {
		if m == "?" {
			continue
		}
		w.polls++
		if m == "" {
			w.withheld[i]++
			continue
		}
		distinct[m] = true
		if _, ok := w.shown[m]; !ok && m == after.MasterAddr {
			w.shown[m] = now
		}
		if m != before.MasterAddr && m != after.MasterAddr {
			w.deposed = append(w.deposed, fmt.Sprintf("%s name server %d shows %s; committed epoch %d master %s (before: %d %s)",
				now.Format("15:04:05.000"), i, m, after.Epoch, after.MasterAddr, before.Epoch, before.MasterAddr))
		}
	}
	if len(distinct) > 1 {
		w.doubles = append(w.doubles, now.Format("15:04:05.000")+" "+fmt.Sprint(views))
	}
	if fmt.Sprint(views) != fmt.Sprint(w.views) {
		w.history = append(w.history, now.Format("15:04:05.000")+" views "+fmt.Sprint(views))
		w.views = views
	}
}

func (w *labWatch) state() (labGroup, int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur, w.leader, slices.Clone(w.views)
}

// shownAt is when a name server first showed addr as master of the
// current epoch.
func (w *labWatch) shownAt(addr string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.shown[addr]
	return at, ok
}

// masterAt reports whether addr was the committed master at some moment
// in [from, to].
func (w *labWatch) masterAt(addr string, from, to time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, tm := range w.since {
		end := time.Time{}
		if i+1 < len(w.since) {
			end = w.since[i+1].at
		}
		// The watch sees a term up to a poll late: a new master's first
		// acknowledgements may precede it by that much.
		if tm.addr == addr && !tm.at.Add(-250*time.Millisecond).After(to) && (end.IsZero() || !end.Before(from)) {
			return true
		}
	}
	return false
}

// labAck is one acknowledged send.
type labAck struct {
	body     string
	host     string
	from, to time.Time
}

// storeHost decodes the broker address in an offsetMsgId (IPv4).
func storeHost(offsetMsgID string) string {
	b, err := hex.DecodeString(offsetMsgID)
	if err != nil || len(b) != 16 {
		return ""
	}
	port := int(b[4])<<24 | int(b[5])<<16 | int(b[6])<<8 | int(b[7])
	return net.JoinHostPort(net.IP(b[:4]).String(), strconv.Itoa(port))
}

// partitionParams are the suite's lengths (partition_soak_test.go: make soak).
type partitionParams struct {
	randomRounds int
	maxHold      time.Duration
}

// TestPartitions runs the partition scenarios one after the other on one
// cluster, producers sending throughout: master isolated from everything
// (with a minority name server, the case), master cut from its
// slaves only, master cut from the controllers only, the raft leader on
// the master's side, a minority name server alone, and rounds of random
// kinds and lengths. Checked: every acknowledged message is consumed; no
// acknowledgement came from a broker that was not the committed master
// during the send; no name-server poll showed a deposed master or two
// masters; promotions and a fresh producer's first acknowledgement are
// timely.
func TestPartitions(t *testing.T) {
	pp := partitionRounds()
	lab := newNetLab(t, labNodes)
	const failoverTimeout = 3 * time.Second
	bname := uniq("pt")
	var nsAddrList, raftAddrs []string
	for i := labNS0; i <= labNS2; i++ {
		nsAddrList = append(nsAddrList, lab.ips[i]+":9876")
		raftAddrs = append(raftAddrs, lab.ips[i]+":9880")
	}
	for i := labNS0; i <= labNS2; i++ {
		dir := t.TempDir()
		lab.start(i, fmt.Sprintf("namesrv-%d", i), nsAddrList[i], []string{"namesrv", "--set", "namesrv.listen=" + nsAddrList[i], "--set", "log.level=info",
			"--set", "namesrv.controller.enabled=true",
			"--set", "namesrv.controller.listen=" + raftAddrs[i],
			"--set", "namesrv.controller.peers=" + strings.Join(raftAddrs, ","),
			"--set", "namesrv.controller.data_dir=" + filepath.Join(dir, "controller"),
			"--set", "namesrv.controller.raft_timeout=500ms",
			"--set", "namesrv.controller.check_interval=100ms",
		}, startNamesrvReady(nsAddrList[i]))
	}
	common := []string{"broker.name=" + bname, "ha.failover=true", "ha.failover_timeout=" + failoverTimeout.String(),
		"ha.heartbeat_interval=300ms", "ha.meta_interval=1s", "ha.lag_log_interval=1s", "ha.max_wait=500ms", "ha.sync_timeout=2s",
		"broker.register_interval=1s", "log.level=info", "broker.namesrv=" + strings.Join(nsAddrList, ",")}
	brokers := map[string]int{}
	var bprocs []*labProc
	for i := labB0; i <= labB2; i++ {
		addr := lab.ips[i] + ":10911"
		brokers[addr] = i
		args := []string{"broker", "--set", "broker.listen=" + addr, "--set", "storage.dir=" + filepath.Join(t.TempDir(), "store")}
		sets := append([]string{"broker.role=SYNC_MASTER"}, common...)
		if i != labB0 {
			sets = append([]string{fmt.Sprintf("broker.id=%d", i-labB0), "broker.role=SLAVE"}, common...)
		}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		ready := func() error { return nil }
		if i == labB0 {
			ready = func() error { return routeHas(nsAddrList[0], "TBW102", addr) }
		}
		bprocs = append(bprocs, lab.start(i, fmt.Sprintf("broker-%d", i-labB0), addr, args, ready))
	}
	w := watchLab(t, nsAddrList, bname)
	// stable waits until a started master is shown by every name server
	// and both slaves are in its committed in-sync set, continuously for
	// 2 s (an in-sync change can land just after a heal).
	stable := func(why string) labGroup {
		t.Helper()
		var g labGroup
		var okSince time.Time
		require.Eventually(t, func() bool {
			var views []string
			g, _, views = w.state()
			ok := g.ready() && len(g.InSync) == 2 && len(views) == len(nsAddrList)
			for _, v := range views {
				ok = ok && v == g.MasterAddr
			}
			switch {
			case !ok:
				okSince = time.Time{}
				return false
			case okSince.IsZero():
				okSince = time.Now()
			}
			return time.Since(okSince) >= 2*time.Second
		}, 90*time.Second, 20*time.Millisecond, "cluster stable (%s): a started master on every name server, both slaves in sync", why)
		return g
	}
	stable("start")

	topic := uniq("Partition")
	fakeNS := []*node{}
	for _, a := range nsAddrList {
		fakeNS = append(fakeNS, &node{addr: a})
	}
	// newProd makes a producer knowing every name server, asking
	// nsAddrList[first] first (the official client asks them in turn).
	newProd := func(first int) rocketmq.Producer {
		list := append(slices.Clone(nsAddrList[first:]), nsAddrList[:first]...)
		p, err := rocketmq.NewProducer(producer.WithNameServer(list),
			producer.WithGroupName(uniq("PG")), producer.WithInstanceName(uniq("pi")),
			producer.WithRetry(2), producer.WithSendMsgTimeout(3*time.Second))
		require.NoError(t, err)
		require.NoError(t, p.Start())
		t.Cleanup(func() { p.Shutdown() })
		return p
	}
	l := newLedger()
	var ackMu sync.Mutex
	var acks []labAck
	record := func(body string, res *primitive.SendResult, from time.Time) {
		l.ack(body)
		ackMu.Lock()
		acks = append(acks, labAck{body: body, host: storeHost(res.OffsetMsgID), from: from, to: time.Now()})
		ackMu.Unlock()
	}
	p := newProd(0)
	res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("warmup")))
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)
	record("warmup", res, time.Now())
	rc := rawClientNoT()
	defer rc.Close()
	for addr := range brokers {
		require.Eventually(t, func() bool { return brokerHasTopic(rc, addr, topic) }, 20*time.Second, 50*time.Millisecond, "%s has the topic", addr)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	loop := func(p rocketmq.Producer, prefix string) {
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
				from := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
				cancel()
				if err != nil || res.Status != primitive.SendOK {
					failed.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				record(body, res, from)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	loop(p, "p0")
	loop(newProd(1), "p1")

	// awaitNewMaster waits for an epoch after g's to be started and shown,
	// and logs the promotion and a fresh producer's first acknowledgement.
	var measures []string
	awaitNewMaster := func(name string, g labGroup, cutAt time.Time, bound time.Duration, askFirst int) labGroup {
		t.Helper()
		var ng labGroup
		require.Eventually(t, func() bool {
			ng, _, _ = w.state()
			_, shown := w.shownAt(ng.MasterAddr)
			return ng.Epoch > g.Epoch && ng.ready() && shown
		}, 30*time.Second, 10*time.Millisecond, "%s: a new master is elected and shown", name)
		at, _ := w.shownAt(ng.MasterAddr)
		promo := at.Sub(cutAt)
		// The first acknowledged SYNC send on the new master, raw, from the
		// moment a name server shows it.
		var first time.Duration
		var notAvail int
		require.Eventually(t, func() bool {
			resp := rawSend(rc, ng.MasterAddr, topic, fmt.Sprintf("%s-raw-%d", name, notAvail))
			if resp != nil && resp.Code == remoting.Success {
				first = time.Since(at)
				l.ack(fmt.Sprintf("%s-raw-%d", name, notAvail))
				return true
			}
			notAvail++
			return false
		}, 20*time.Second, 5*time.Millisecond, "%s: the new master acknowledges a send", name)
		// A producer created now, knowing every name server, asking
		// name server askFirst first (the minority one, when there is one).
		fresh := newProd(askFirst)
		created := time.Now()
		var freshFirst time.Duration
		require.Eventually(t, func() bool {
			from := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			body := uniq(name + "-fresh")
			res, err := fresh.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
			if err != nil || res.Status != primitive.SendOK {
				return false
			}
			record(body, res, from)
			freshFirst = time.Since(created)
			return true
		}, 40*time.Second, 20*time.Millisecond, "%s: a new producer knowing every name server reaches the new master", name)
		m := fmt.Sprintf("%s: promotion shown %s after the cut; first acknowledged SYNC send %s after it (%d refused before); a new producer's first acknowledgement %s after its creation",
			name, promo.Round(time.Millisecond), first.Round(time.Millisecond), notAvail, freshFirst.Round(time.Millisecond))
		t.Log("PARTITION: " + m)
		measures = append(measures, m)
		assert.Less(t, promo, bound, "%s: promotion within the failover timeout and a margin", name)
		assert.Less(t, freshFirst, 10*time.Second, "%s: a new producer reaches the new master within one route refresh", name)
		return ng
	}
	masterIdx := func(g labGroup) int { return brokers[g.MasterAddr] }
	hold := func(d time.Duration) { time.Sleep(d) } // the partition's length (not synchronisation)

	// 1. A minority name server (not the raft leader), then the master
	// isolated from everything.
	g := stable("before minority+isolation")
	_, leader, _ := w.state()
	minority := (max(leader, 0) + 1) % 3
	for b := range labNodes {
		if b != minority {
			lab.cut(minority, b)
		}
	}
	hold(time.Second)
	cutAt := time.Now()
	lab.isolate(masterIdx(g))
	awaitNewMaster("master isolated, minority name server", g, cutAt, failoverTimeout+4*time.Second, minority)
	lab.heal()
	g = stable("after minority+isolation")

	// 2. The master cut from its slaves only: no election, no
	// acknowledgement without a slave.
	m := masterIdx(g)
	for b := labB0; b <= labB2; b++ {
		if b != m {
			lab.cut(m, b)
		}
	}
	hold(failoverTimeout + 2*time.Second)
	ng, _, _ := w.state()
	assert.Equal(t, g.Epoch, ng.Epoch, "master cut from its slaves: no election")
	lab.heal()
	g = stable("after slaves cut")

	// 3. The master cut from the controllers only: it fences itself, a
	// slave is elected; producers still reach the old master.
	cutAt = time.Now()
	for i := labNS0; i <= labNS2; i++ {
		lab.cut(masterIdx(g), i)
	}
	awaitNewMaster("master cut from the controllers", g, cutAt, failoverTimeout+4*time.Second, 0)
	lab.heal()
	g = stable("after controllers cut")

	// 4. The raft leader on the master's side.
	_, leader, _ = w.state()
	require.GreaterOrEqual(t, leader, 0, "a raft leader answers")
	cutAt = time.Now()
	lab.split(leader, masterIdx(g))
	// The other two elect a raft leader first, which gives the master a
	// whole failover timeout from its election.
	awaitNewMaster("raft leader on the master's side", g, cutAt, failoverTimeout+6*time.Second, leader)
	lab.heal()
	g = stable("after leader split")

	// 5. A minority name server alone: it withholds the master, nothing
	// changes.
	_, leader, _ = w.state()
	minority = (max(leader, 0) + 1) % 3
	w.mu.Lock()
	heldBefore := w.withheld[minority]
	w.mu.Unlock()
	for b := range labNodes {
		if b != minority {
			lab.cut(minority, b)
		}
	}
	hold(2 * time.Second)
	w.mu.Lock()
	held := w.withheld[minority] - heldBefore
	w.mu.Unlock()
	assert.Positive(t, held, "the minority name server answers the group without a master")
	lab.heal()
	ng = stable("after lone minority")
	assert.Equal(t, g.Epoch, ng.Epoch, "a minority name server alone changes nothing")
	g = ng

	// 6. Random kinds and lengths.
	for r := range pp.randomRounds {
		d := time.Duration(500+randInt(int(pp.maxHold/time.Millisecond)-500)) * time.Millisecond
		kind := randInt(3)
		m := masterIdx(g)
		switch kind {
		case 0:
			lab.isolate(m)
		case 1:
			for b := labB0; b <= labB2; b++ {
				if b != m {
					lab.cut(m, b)
				}
			}
		case 2:
			for i := labNS0; i <= labNS2; i++ {
				lab.cut(m, i)
			}
		}
		t.Logf("PARTITION: random round %d: kind %d for %s", r, kind, d)
		hold(d)
		lab.heal()
		healAt := time.Now()
		ng := stable(fmt.Sprintf("random round %d", r))
		t.Logf("PARTITION: random round %d: epoch %d → %d, stable %s after the heal (2 s of it the stability window)", r, g.Epoch, ng.Epoch,
			time.Since(healAt).Round(time.Millisecond))
		g = ng
	}

	close(stop)
	wg.Wait()
	acked, _ := l.counts()
	t.Logf("PARTITION: acknowledged %d, not acknowledged %d", acked, failed.Load())
	// A master that misses its controller lease after the rounds (on two
	// cores shared with the rest of make test) is revoked and confirmed
	// again, its route withheld meanwhile, as designed; the official
	// consumer's Start fails while it is (and shuts itself down), so the
	// test starts another until one gets the route.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		err := tryLedgerConsumer(t, fakeNS, topic, l)
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no ledger consumer started in 60 s: %v", err)
		t.Logf("PARTITION: ledger consumer: %v (trying again)", err)
	}
	waitConsumed(t, l, 90*time.Second)

	ackMu.Lock()
	var bad []string
	for _, a := range acks {
		if a.host != "" && !w.masterAt(a.host, a.from, a.to) {
			bad = append(bad, fmt.Sprintf("%s from %s (%s..%s)", a.body, a.host, a.from.Format("15:04:05.000"), a.to.Format("15:04:05.000")))
		}
	}
	ackMu.Unlock()
	w.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("PARTITION: %d name-server polls; withheld per name server %v", w.polls, w.withheld)
	t.Logf("PARTITION: watch history:\n%s", strings.Join(w.history, "\n"))
	for _, m := range measures {
		t.Log("PARTITION: " + m)
	}
	assert.Empty(t, bad, "no acknowledgement from a broker that was not the committed master")
	assert.Empty(t, w.deposed, "no poll shows a deposed master")
	assert.Empty(t, w.doubles, "no poll round shows two masters")
	_ = bprocs
}

func randInt(n int) int {
	if n <= 0 {
		return 0
	}
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}

// rawSend sends one message to a broker directly (SEND_MESSAGE, queue 0).
func rawSend(c *remoting.Client, addr, topic, body string) *remoting.Command {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties":     message.Properties{"UNIQ_KEY": body}.Encode(),
		"reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}, []byte(body)))
	if err != nil {
		return nil
	}
	return resp
}
