// Package metrics serves Prometheus metrics for a broker and/or a name
// server: traffic per topic and per consumer group, send and pull
// latency, consumer lag and delay, store size and free disk, connections,
// replication lag, name-server routes and the schedule, retry and
// dead-letter backlogs. Counters are fed by broker hooks (stored messages,
// pulled messages, processor timings); gauges are computed when scraped.
// Every broker series carries the broker's cluster and broker (name)
// labels, as rocketmq-exporter's do; docs/METRICS.md lists them all with
// their rocketmq-exporter equivalents.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/netlimit"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/namesrv"
)

// Deps are what the metrics observe; each is optional.
type Deps struct {
	Broker  *broker.Broker
	Namesrv *namesrv.Server
	// Replica is the broker's replication service (modules/ha); its
	// series are exported on slaves.
	Replica Replica
	// StorageDir is the broker's storage.dir (store size, free disk).
	StorageDir string
	// Sign signs the in-process requests made at scrape time (servers
	// with ACL on).
	Sign   func(*remoting.Command)
	Logger *slog.Logger
	// Collectors are other modules' series (the mirror's), exported with
	// the broker's labels when there is a broker.
	Collectors []prometheus.Collector
}

// Replica is what the metrics read of replication (*ha.Service).
type Replica interface {
	// Lag is, on a slave, how many commit-log bytes it is behind its
	// master.
	Lag() int64
	// Following reports whether the slave's last request to its master
	// worked.
	Following() bool
}

// Service owns a Prometheus registry and the HTTP server exposing it.
type Service struct {
	cfg  *Config
	deps Deps
	log  *slog.Logger
	reg  *prometheus.Registry
	// soft: a bind failure only logs (the `mq dev` default address).
	soft bool

	msgsIn, bytesIn, msgsOut, bytesOut *prometheus.CounterVec
	groupMsgs, groupBytes              *prometheus.CounterVec
	sendLat, pullLat                   prometheus.Histogram
	delay                              delayCache
	compat                             *compatCollector // nil when metrics.rocketmq_exporter_compat is off

	mu  sync.Mutex
	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup
}

// New builds the metrics and hooks them into the broker; Start serves them.
func New(cfg *Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, deps: deps, log: log.With("component", "metrics"), reg: prometheus.NewRegistry()}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if b := deps.Broker; b != nil {
		s.msgsIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_messages_in_total", Help: "Messages stored, by topic."}, []string{"topic"})
		s.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_bytes_in_total", Help: "Bytes stored (record size), by topic."}, []string{"topic"})
		s.msgsOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_messages_out_total", Help: "Messages delivered by pulls, by topic."}, []string{"topic"})
		s.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_bytes_out_total", Help: "Bytes delivered by pulls (record size), by topic."}, []string{"topic"})
		buckets := prometheus.ExponentialBuckets(0.0001, 2, 16) // 100µs .. ~3.3s
		s.sendLat = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quiver_send_duration_seconds", Help: "Time the broker took to process a send (store write included).", Buckets: buckets})
		s.pullLat = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quiver_pull_duration_seconds", Help: "Time the broker took to answer a pull at once (held pulls are not counted).", Buckets: buckets})
		s.groupMsgs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_consumer_messages_total", Help: "Messages delivered by pulls, by consumer group and topic (rate() is the group's consume rate)."}, []string{"group", "topic"})
		s.groupBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_consumer_bytes_total", Help: "Bytes delivered by pulls (record size), by consumer group and topic."}, []string{"group", "topic"})
		// Every broker series names its broker, as rocketmq-exporter's do.
		c := b.Config()
		breg := prometheus.WrapRegistererWith(prometheus.Labels{"cluster": c.Cluster, "broker": c.Name}, s.reg)
		breg.MustRegister(s.msgsIn, s.bytesIn, s.msgsOut, s.bytesOut, s.groupMsgs, s.groupBytes, s.sendLat, s.pullLat, &brokerCollector{s: s})
		breg.MustRegister(deps.Collectors...)
		if deps.Replica != nil {
			breg.MustRegister(&replicaCollector{b: b, r: deps.Replica})
		}
		if cfg.RocketMQExporterCompat {
			// Unwrapped: these carry rocketmq-exporter's own label sets.
			s.compat = &compatCollector{s: s, timeout: compatClientTimeout, mute: map[string]time.Time{}}
			s.reg.MustRegister(s.compat)
		}
		b.AddStoredListener(s.stored)
		b.OnGroupPulled(func(topic, group string, msgs, bytes int) {
			s.msgsOut.WithLabelValues(topic).Add(float64(msgs))
			s.bytesOut.WithLabelValues(topic).Add(float64(bytes))
			s.groupMsgs.WithLabelValues(group, topic).Add(float64(msgs))
			s.groupBytes.WithLabelValues(group, topic).Add(float64(bytes))
		})
		b.Router().Observe(s.observe)
	}
	if deps.Namesrv != nil {
		s.reg.MustRegister(&namesrvCollector{n: deps.Namesrv})
	}
	return s, nil
}

// Registry is the registry served (tests, embedding).
func (s *Service) Registry() *prometheus.Registry { return s.reg }

func (s *Service) stored(msgs []*message.Ext, pos []store.Position) {
	for i, m := range msgs {
		s.msgsIn.WithLabelValues(m.Topic).Inc()
		if i < len(pos) {
			s.bytesIn.WithLabelValues(m.Topic).Add(float64(pos[i].Size))
		}
	}
}

func (s *Service) observe(code int32, d time.Duration, rc int32) {
	switch code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage:
		s.sendLat.Observe(d.Seconds())
	case remoting.PullMessage:
		if rc >= 0 {
			s.pullLat.Observe(d.Seconds())
		}
	}
}

// Addr is the bound address ("" when not serving).
func (s *Service) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Start binds metrics.listen synchronously (a bad address fails start-up)
// and serves in a goroutine. An empty address serves nothing.
func (s *Service) Start(ctx context.Context) error {
	if s.cfg.Listen == "" {
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		if s.soft {
			s.log.Warn("metrics not served: default address busy (set metrics.listen)", "addr", s.cfg.Listen, "err", err)
			return nil
		}
		return fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", s.ready)
	// Bounded as the console is (docs/SECURITY.md): connections, header
	// and body sizes, slow and idle connections.
	lim := netlimit.DefaultHTTP()
	srv := lim.Server(mux, s.log)
	ln = lim.Listener(ln, "metrics", s.log)
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server", "err", err)
		}
	}()
	s.log.Info("metrics listening", "addr", ln.Addr().String())
	return nil
}

// ready answers 200 once the broker and name server it watches are bound,
// the broker's registrations are accepted and its store accepts writes.
func (s *Service) ready(w http.ResponseWriter, _ *http.Request) {
	if b := s.deps.Broker; b != nil && len(b.Addrs()) == 0 {
		http.Error(w, "broker not listening", http.StatusServiceUnavailable)
		return
	}
	if b := s.deps.Broker; b != nil {
		if refused := b.RegistrationRefused(); len(refused) > 0 {
			// Not routable through those name servers: not ready.
			nss := make([]string, 0, len(refused))
			for ns := range refused {
				nss = append(nss, ns)
			}
			sort.Strings(nss)
			msg := "broker registration refused"
			for _, ns := range nss {
				msg += "\n" + ns + ": " + refused[ns]
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
	}
	if b := s.deps.Broker; b != nil {
		// A store refusing writes (disk full, or failed until reopen):
		// not ready, with the reason; /healthz stays 200.
		if ws, ok := b.Store().(store.WriteStater); ok {
			if err := ws.WriteState(); err != nil {
				if reason := store.WriteRefusal(err); reason != "" {
					http.Error(w, "store refuses writes: "+reason+"\n"+err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
		}
	}
	if n := s.deps.Namesrv; n != nil && len(n.Addrs()) == 0 {
		http.Error(w, "name server not listening", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// Stop shuts the HTTP server down and waits for it.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	s.wg.Wait()
	return err
}

// brokerCollector computes the broker gauges at scrape time.
type brokerCollector struct{ s *Service }

var (
	descLag        = prometheus.NewDesc("quiver_consumer_lag_messages", "Messages stored but not yet committed by the group, per queue.", []string{"group", "topic", "queue"}, nil)
	descBacklog    = prometheus.NewDesc("quiver_backlog_messages", "Messages waiting in system queues: schedule (not yet due or delivered), retry (not yet re-consumed), dlq (dead letters not consumed).", []string{"kind", "topic"}, nil)
	descFsync      = prometheus.NewDesc("quiver_store_fsync_seconds", "Time the store spent in commit-log fsync rounds since it opened (a summary: count and sum).", nil, nil)
	descFsyncMax   = prometheus.NewDesc("quiver_store_fsync_max_seconds", "Longest commit-log fsync round since the store opened.", nil, nil)
	descStoreSize  = prometheus.NewDesc("quiver_store_size_bytes", "Disk space taken by the files under storage.dir (allocated blocks).", nil, nil)
	descDiskFree   = prometheus.NewDesc("quiver_disk_free_bytes", "Bytes available on the file system holding storage.dir.", nil, nil)
	descDiskTotal  = prometheus.NewDesc("quiver_disk_total_bytes", "Size of the file system holding storage.dir.", nil, nil)
	descConns      = prometheus.NewDesc("quiver_connections", "Open client connections to the broker, by transport.", []string{"transport"}, nil)
	descHeld       = prometheus.NewDesc("quiver_held_pulls", "Pull requests parked on empty queues (long polling).", nil, nil)
	descBusy       = prometheus.NewDesc("quiver_broker_busy_total", "Sends answered busy by flow control, by reason.", []string{"reason"}, nil)
	descRefused    = prometheus.NewDesc("quiver_broker_write_refused_total", "Sends the store refused, by reason: disk_full (answered SERVICE_NOT_AVAILABLE; clears when space returns), store_failed (answered SYSTEM_ERROR; writes disabled until reopen after a failed fsync).", []string{"reason"}, nil)
	descNoWrites   = prometheus.NewDesc("quiver_store_writes_refused", "1 while the store refuses writes for the reason (disk_full clears by itself, store_failed needs a restart), else 0; /readyz answers 503 meanwhile.", []string{"reason"}, nil)
	descQueueMax   = prometheus.NewDesc("quiver_queue_max_offset", "Next offset to write, per queue.", []string{"topic", "queue"}, nil)
	descTopicMax   = prometheus.NewDesc("quiver_topic_max_offset", "Next offsets to write summed over the topic's queues on this broker (the producer offset).", []string{"topic"}, nil)
	descCommitted  = prometheus.NewDesc("quiver_consumer_offset", "Offset the group committed, per queue.", []string{"group", "topic", "queue"}, nil)
	descDelay      = prometheus.NewDesc("quiver_consumer_delay_seconds", "Age of the next message the group has to consume (now minus its store time), per queue; 0 when the group is caught up.", []string{"group", "topic", "queue"}, nil)
	descUnmeasured = prometheus.NewDesc("quiver_consumer_delay_unmeasured_queues", "Lagging queues whose delay this scrape did not measure (over the per-scrape read budget, or unreadable).", nil, nil)
	descRepLag     = prometheus.NewDesc("quiver_replica_lag_bytes", "On a slave: commit-log bytes it is behind its master, as of the master's last answer.", nil, nil)
	descRepFollow  = prometheus.NewDesc("quiver_replica_following", "On a slave: 1 when its last request to its master worked, else 0.", nil, nil)
	descNSTopics   = prometheus.NewDesc("quiver_namesrv_topics", "Topics the name server routes.", nil, nil)
	descNSBrokers  = prometheus.NewDesc("quiver_namesrv_brokers", "Broker addresses registered with the name server.", nil, nil)
	descNSClusters = prometheus.NewDesc("quiver_namesrv_clusters", "Clusters registered with the name server.", nil, nil)
	descNSWithheld = prometheus.NewDesc("quiver_namesrv_masters_withheld_total", "Masters of broker groups under automatic failover left out of route and cluster answers because this name server's controller could not vouch for them (no raft majority confirmed the current epoch, or the master is being deposed).", nil, nil)
)

// Store damage (store.Verifier).
var (
	descCorruptSkips = prometheus.NewDesc("quiver_store_corruption_skipped_total", "Records or index entries the store skipped or rebuilt because of damage since it opened (recovery, reads, scrubs).", nil, nil)
	descCorruptFound = prometheus.NewDesc("quiver_store_corruption_findings", "Damage findings the store listed since it opened (mq store verify lists them with the damage manifest).", nil, nil)
)

func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descCommitted, descDelay, descUnmeasured, descBacklog, descFsync, descFsyncMax, descCorruptSkips, descCorruptFound, descStoreSize, descDiskFree, descDiskTotal, descConns, descHeld, descBusy, descRefused, descNoWrites, descQueueMax, descTopicMax} {
		ch <- d
	}
}

// Collect reports, at scrape time: each group's lag, committed offset and
// delay; the backlog of system queues and each topic's max offsets; the
// store's fsync and damage figures and its disk space; connections by
// transport, held pulls and flow-control refusals.
func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.s.deps.Broker
	st := b.Store()
	offsets := b.ConsumerOffsets()
	c.collectConsumers(ch, st, offsets)
	for _, topic := range b.Topics() {
		c.collectTopic(ch, st, offsets, topic)
	}
	c.collectStore(ch, st)
	collectConnections(ch, b)
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(b.HeldPulls()))
	// The flow-control counters, as GET_BROKER_RUNTIME_INFO's
	// quiverFlowBusy* keys (read directly: the full runtime table reads
	// the disk and the commit log).
	fs := b.FlowStats()
	for _, r := range []struct {
		reason string
		n      int64
	}{{"queue", fs.BusyQueue}, {"store", fs.BusyStore}, {"quota", fs.BusyQuota}} {
		ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, float64(r.n), r.reason)
	}
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(fs.DiskFull), store.RefusedDiskFull)
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(fs.StoreFailed), store.RefusedStoreFailed)
	now := writeRefusal(st)
	for _, reason := range []string{store.RefusedDiskFull, store.RefusedStoreFailed} {
		v := 0.0
		if reason == now {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descNoWrites, prometheus.GaugeValue, v, reason)
	}
}

// writeRefusal is why st refuses writes now (store.WriteRefusal of its
// WriteState), "" when it accepts them or cannot say. A closed store is
// not a refusal: it is shutting down.
func writeRefusal(st store.Store) string {
	if ws, ok := st.(store.WriteStater); ok {
		return store.WriteRefusal(ws.WriteState())
	}
	return ""
}

// groupOffsets is the broker's committed offsets: group -> topic -> queue.
type groupOffsets = map[string]map[string]map[int32]int64

// queueOffsets is the store's min and max offset of a queue; ok is false
// when the store cannot say.
func queueOffsets(st store.Store, topic string, id int32) (min, max int64, ok bool) {
	min, max, err := st.Offsets(store.Queue{Topic: topic, ID: id})
	return min, max, err == nil
}

func queueLabel(id int32) string { return strconv.Itoa(int(id)) }

// collectConsumers reports the lag, committed offset and delay of every
// group on every topic it committed on, retry topics aside (they are
// backlog), and how many lagging queues the delay did not measure.
func (c *brokerCollector) collectConsumers(ch chan<- prometheus.Metric, st store.Store, offsets groupOffsets) {
	dm := c.s.delay.begin(st)
	for group, topics := range offsets {
		for topic, qs := range topics {
			if protocol.IsRetryTopic(topic) {
				continue
			}
			for id, off := range qs {
				min, max, ok := queueOffsets(st, topic, id)
				if !ok {
					continue
				}
				ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(max64(max-off, 0)), group, topic, queueLabel(id))
				ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(off), group, topic, queueLabel(id))
				if d, ok := dm.delay(store.Queue{Topic: topic, ID: id}, max64(off, min), max); ok {
					ch <- prometheus.MustNewConstMetric(descDelay, prometheus.GaugeValue, d.Seconds(), group, topic, queueLabel(id))
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(descUnmeasured, prometheus.GaugeValue, float64(dm.end()))
}

// collectTopic reports a retry, dead-letter or schedule topic's backlog,
// and a user topic's max offset per queue and summed.
func (c *brokerCollector) collectTopic(ch chan<- prometheus.Metric, st store.Store, offsets groupOffsets, topic string) {
	b := c.s.deps.Broker
	n := b.QueueCount(topic)
	// backlog sums max-done over the topic's queues; done(id, min) is the
	// consumed offset of a queue, min where nothing says otherwise.
	backlog := func(kind string, done func(id int32, min int64) int64) {
		var total int64
		for id := int32(0); id < n; id++ {
			if min, max, ok := queueOffsets(st, topic, id); ok {
				total += max64(max-done(id, min), 0)
			}
		}
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(total), kind, topic)
	}
	switch {
	case strings.HasPrefix(topic, protocol.RetryGroupPrefix):
		group := strings.TrimPrefix(topic, protocol.RetryGroupPrefix)
		backlog("retry", func(id int32, min int64) int64 {
			if done, ok := offsets[group][topic][id]; ok {
				return done
			}
			return min
		})
	case strings.HasPrefix(topic, protocol.DLQGroupPrefix):
		backlog("dlq", func(id int32, min int64) int64 {
			done := min
			for _, topics := range offsets {
				if o, ok := topics[topic][id]; ok && o > done {
					done = o
				}
			}
			return done
		})
	case topic == protocol.ScheduleTopic:
		progress := c.s.delayProgress()
		backlog("schedule", func(id int32, min int64) int64 {
			if done, ok := progress[int(id)+1]; ok {
				return done
			}
			return min
		})
	}
	if !internalTopic(b, topic) {
		var sum int64
		for id := int32(0); id < n; id++ {
			if _, max, ok := queueOffsets(st, topic, id); ok {
				sum += max
				ch <- prometheus.MustNewConstMetric(descQueueMax, prometheus.GaugeValue, float64(max), topic, queueLabel(id))
			}
		}
		ch <- prometheus.MustNewConstMetric(descTopicMax, prometheus.GaugeValue, float64(sum), topic)
	}
}

// collectStore reports the store's fsync rounds and damage (where it
// observes them), the size of storage.dir and its file system's space.
func (c *brokerCollector) collectStore(ch chan<- prometheus.Metric, st store.Store) {
	if so, ok := st.(store.SyncObserver); ok {
		ss := so.SyncStats()
		ch <- prometheus.MustNewConstSummary(descFsync, uint64(ss.Syncs), ss.Total.Seconds(), nil)
		ch <- prometheus.MustNewConstMetric(descFsyncMax, prometheus.GaugeValue, ss.Max.Seconds())
	}
	if v, ok := st.(store.Verifier); ok {
		ch <- prometheus.MustNewConstMetric(descCorruptSkips, prometheus.CounterValue, float64(v.Skipped()))
		ch <- prometheus.MustNewConstMetric(descCorruptFound, prometheus.GaugeValue, float64(len(v.Damage())))
	}
	dir := c.s.deps.StorageDir
	if dir == "" {
		return
	}
	var size int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += usage(fi)
			}
		}
		return nil
	})
	ch <- prometheus.MustNewConstMetric(descStoreSize, prometheus.GaugeValue, float64(size))
	if free, total, ok := diskSpace(dir); ok {
		ch <- prometheus.MustNewConstMetric(descDiskFree, prometheus.GaugeValue, float64(free))
		ch <- prometheus.MustNewConstMetric(descDiskTotal, prometheus.GaugeValue, float64(total))
	}
}

// collectConnections reports the broker's open connections by the
// transport of the listener they came in on; every listening transport
// shows, with 0 when idle.
func collectConnections(ch chan<- prometheus.Metric, b *broker.Broker) {
	byTransport := map[string]int{}
	schemes := map[string]string{}
	for _, a := range b.Addrs() {
		scheme, hp := transport.SplitScheme(a)
		if scheme == "" {
			scheme = "tcp"
		}
		schemes[hp] = scheme
		if _, ok := byTransport[scheme]; !ok {
			byTransport[scheme] = 0
		}
	}
	for _, p := range b.Peers() {
		_, hp := transport.SplitScheme(p.LocalAddr())
		t := schemes[hp]
		if t == "" {
			t = "other"
		}
		byTransport[t]++
	}
	for t, n := range byTransport {
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(n), t)
	}
}

// delayProgress asks the schedule module, in process, for each delay
// level's delivered offset (GET_ALL_DELAY_OFFSET); nil when it does not
// answer (schedule off, or refused).
func (s *Service) delayProgress() (out map[int]int64) {
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	req := remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil)
	if s.deps.Sign != nil {
		s.deps.Sign(req)
	}
	resp := s.deps.Broker.Router().Handle(context.Background(), nil, req)
	if resp == nil || resp.Code != remoting.Success {
		return nil
	}
	var doc struct {
		OffsetTable map[string]int64 `json:"offsetTable"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return nil
	}
	out = map[int]int64{}
	for k, v := range doc.OffsetTable {
		if n, err := strconv.Atoi(k); err == nil {
			out[n] = v
		}
	}
	return out
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// namesrvCollector reports the name server's route counts.
type namesrvCollector struct{ n *namesrv.Server }

func (c *namesrvCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNSTopics
	ch <- descNSBrokers
	ch <- descNSClusters
	ch <- descNSWithheld
}

func (c *namesrvCollector) Collect(ch chan<- prometheus.Metric) {
	rt := c.n.Routes()
	ch <- prometheus.MustNewConstMetric(descNSTopics, prometheus.GaugeValue, float64(len(rt.Topics())))
	ci := rt.ClusterInfo()
	addrs := 0
	for _, bd := range ci.BrokerAddrTable {
		if bd != nil {
			addrs += len(bd.BrokerAddrs)
		}
	}
	ch <- prometheus.MustNewConstMetric(descNSBrokers, prometheus.GaugeValue, float64(addrs))
	ch <- prometheus.MustNewConstMetric(descNSClusters, prometheus.GaugeValue, float64(len(ci.ClusterAddrTable)))
	ch <- prometheus.MustNewConstMetric(descNSWithheld, prometheus.CounterValue, float64(c.n.MastersWithheld()))
}

// internalTopic tells the broker's own topics (system, cluster and broker
// name, TBW102, rmq_sys_*), which get no per-queue gauge.
func internalTopic(b *broker.Broker, topic string) bool {
	c := b.Config()
	return (protocol.IsSystemTopic(topic) && !protocol.IsRetryTopic(topic) && !strings.HasPrefix(topic, protocol.DLQGroupPrefix)) ||
		topic == c.Cluster || topic == c.Name || topic == protocol.AutoCreateTopic || strings.HasPrefix(topic, "rmq_sys_")
}

// replicaCollector reports replication on a slave (the role is read at
// each scrape: automatic failover changes it).
type replicaCollector struct {
	b *broker.Broker
	r Replica
}

func (c *replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRepLag
	ch <- descRepFollow
}

func (c *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.b.IsSlave() {
		return
	}
	following := 0.0
	if c.r.Following() {
		following = 1
	}
	ch <- prometheus.MustNewConstMetric(descRepLag, prometheus.GaugeValue, float64(c.r.Lag()))
	ch <- prometheus.MustNewConstMetric(descRepFollow, prometheus.GaugeValue, following)
}
