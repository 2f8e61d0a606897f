// Package namesrv is Quiver's name server: brokers register their
// addresses and topics with it, and clients ask it for topic routes. It
// speaks RocketMQ 4.x's name server protocol (REGISTER_BROKER,
// GET_ROUTEINFO_BY_TOPIC and friends) so unmodified RocketMQ clients and
// tools can use it.
package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
)

// ErrStarted is returned by Start on a server already started.
var ErrStarted = errors.New("namesrv: already started")

// Server is a name server. Create it with New, then Start and Stop it.
type Server struct {
	cfg        *Config
	transports *transport.Set
	log        *slog.Logger
	routes     *RouteTable
	kv         *KVStore
	settings   *runtimeSettings
	router     *remoting.Router
	serverOpts remoting.ServerOptions

	withheld atomic.Uint64     // masters left out of answers (fence.go)
	heldMu   sync.Mutex        // guards held
	held     map[string]string // broker name → master withheld last (fence.go)

	mu      sync.Mutex
	started bool
	stopped bool
	srv     *remoting.Server
	check   RegisterCheck
	vouch   MasterVouch
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New builds a name server from a validated config. It binds nothing
// until Start.
func New(cfg *Config, transports *transport.Set, log *slog.Logger) (*Server, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("namesrv: config: %w", err)
	}
	if transports == nil {
		return nil, errors.New("namesrv: no transports")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:        cfg,
		transports: transports,
		log:        log.With("component", "namesrv"),
		routes:     NewRouteTable(nil),
		kv:         NewKVStore(cfg.KVConfigPath),
		settings:   newRuntimeSettings(cfg),
		router:     remoting.NewRouter(),
		held:       map[string]string{},
	}
	s.router.Register(remoting.RegisterBroker, s.registerBroker)
	s.router.Register(remoting.UnregisterBroker, s.unregisterBroker)
	s.router.Register(remoting.RegisterTopicInNamesrv, s.registerTopic)
	s.router.Register(remoting.GetRouteInfoByTopic, s.getRouteInfoByTopic)
	s.router.Register(remoting.GetBrokerClusterInfo, s.getBrokerClusterInfo)
	s.router.Register(remoting.GetAllTopicListFromNameServer, s.getAllTopicList)
	s.router.Register(remoting.DeleteTopicInNamesrv, s.deleteTopic)
	s.router.Register(remoting.QueryDataVersion, s.queryDataVersion)
	s.router.Register(getTopicsByCluster, s.getTopicsByCluster)
	s.registerAdmin()
	return s, nil
}

// getTopicsByCluster is Java's GET_TOPICS_BY_CLUSTER, used by admin tools.
const getTopicsByCluster = remoting.GetTopicsByCluster

// SetServerOptions sets connection limits and per-connection options; call
// it before Start.
func (s *Server) SetServerOptions(o remoting.ServerOptions) { s.serverOpts = o }

// Routes returns the route table (tests, admin).
func (s *Server) Routes() *RouteTable { return s.routes }

// Router returns the request router, so callers can add processors.
func (s *Server) Router() *remoting.Router { return s.router }

// Start loads the KV config, binds cfg.Listen on every enabled transport
// synchronously (a bad address or KV file fails here), then serves and
// scans for expired brokers in the background until Stop.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return ErrStarted
	}
	if err := s.kv.Load(); err != nil {
		return err
	}
	s.warnBadOrderConf()
	lns, err := s.transports.Listen(ctx, s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("namesrv: %w", err)
	}
	opts := s.serverOpts
	opts.OnDisconnect = s.onDisconnect
	s.srv = remoting.NewServer(s.router, s.log, opts)
	for _, ln := range lns {
		s.srv.Serve(ln)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.scanLoop(sctx)
	}()
	s.started = true
	s.log.Info("name server listening", "addrs", s.srv.Addrs(), "transports", s.transports.IDs())
	return nil
}

// Addrs lists the bound addresses, one per transport (empty before Start).
func (s *Server) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return nil
	}
	return s.srv.Addrs()
}

// Stop stops the scanner, closes the listeners and connections, and waits
// for their goroutines or ctx's end. It is safe to call more than once and
// before Start.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped || !s.started {
		s.stopped = true
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	srv, cancel := s.srv, s.cancel
	s.mu.Unlock()

	cancel()
	s.wg.Wait()
	if err := srv.Close(ctx); err != nil {
		return fmt.Errorf("namesrv: stop: %w", err)
	}
	return nil
}

func (s *Server) scanLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.scan()
		}
	}
}

// scan drops brokers not heard from within BrokerTimeout and closes their
// connections.
func (s *Server) scan() {
	timeout := s.brokerTimeout()
	for addr, lb := range s.routes.Expire(timeout) {
		s.log.Warn("broker expired", "broker", addr, "last_update", lb.LastUpdate, "timeout", timeout)
		if lb.Peer != nil {
			lb.Peer.Close()
		}
	}
}

func (s *Server) onDisconnect(p *remoting.Peer) {
	for _, addr := range s.routes.DropConnection(p) {
		s.log.Info("broker connection closed; broker removed", "broker", addr, "remote", p.RemoteAddr())
	}
}

func ok(req *remoting.Command) *remoting.Command {
	return remoting.NewResponse(req, remoting.Success, "")
}

func sysErr(req *remoting.Command, format string, args ...any) *remoting.Command {
	return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf(format, args...))
}

// bodyCRCMatches checks REGISTER_BROKER's bodyCrc32 (its low 32 bits: it
// travels as a signed int). Java brokers send UtilAll.crc32, the CRC-32 with
// its top bit cleared, and so does Quiver now; Quiver brokers before that
// sent the full CRC-32, accepted too so that a mixed-version cluster keeps
// registering.
func bodyCRCMatches(crc uint32, body []byte) bool {
	sum := crc32.ChecksumIEEE(body)
	return crc == sum&0x7FFFFFFF || crc == sum
}

func (s *Server) registerBroker(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	r := BrokerRegistration{
		BrokerName:   e.String("brokerName"),
		BrokerAddr:   e.String("brokerAddr"),
		ClusterName:  e.String("clusterName"),
		HAServerAddr: e.String("haServerAddr"),
		BrokerID:     e.Int64("brokerId"),
		Peer:         p,
	}
	compressed := e.Bool("compressed")
	crc := e.OptInt64("bodyCrc32", 0)
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	if r.BrokerName == "" || r.BrokerAddr == "" || r.ClusterName == "" {
		return sysErr(req, "brokerName, brokerAddr and clusterName must not be empty")
	}
	if r.BrokerID < 0 {
		return sysErr(req, "brokerId %d is negative", r.BrokerID)
	}
	if crc != 0 && !bodyCRCMatches(uint32(crc), req.Body) {
		s.log.Warn("register broker: crc32 not match", "broker", r.BrokerAddr, "remote", p.RemoteAddr())
		return sysErr(req, "crc32 not match")
	}
	body, err := decodeRegisterBody(req.Body, compressed)
	if err != nil {
		s.log.Warn("register broker: bad body", "broker", r.BrokerAddr, "remote", p.RemoteAddr(), "err", err)
		return sysErr(req, "%v", err)
	}
	r.Topics = body.TopicConfigSerializeWrapper
	r.FilterServers = body.FilterServerList
	if check := s.registerCheck(); check != nil {
		epoch, hasEpoch := int64(0), req.Ext(EpochExt) != ""
		if hasEpoch {
			if epoch, err = strconv.ParseInt(req.Ext(EpochExt), 10, 64); err != nil {
				return sysErr(req, "%s: %v", EpochExt, err)
			}
		}
		if err := check(r, epoch, hasEpoch); err != nil {
			s.log.Warn("register broker refused", "broker", r.BrokerName, "id", r.BrokerID, "addr", r.BrokerAddr, "epoch", epoch, "reason", err)
			return sysErr(req, "%v", err)
		}
	}
	res := s.routes.RegisterBroker(r)
	if res.Replaced != "" {
		// Java replaces it silently; two processes started with the same
		// broker.name then take turns in the routes. Say so.
		s.log.Warn("broker registration replaced a live broker of the same name and id from another address: two brokers share broker.name (give each its own)",
			"cluster", r.ClusterName, "broker", r.BrokerName, "id", r.BrokerID, "addr", r.BrokerAddr, "replaced", res.Replaced, "remote", p.RemoteAddr())
	}
	if res.New {
		s.log.Info("broker registered", "cluster", r.ClusterName, "broker", r.BrokerName, "id", r.BrokerID,
			"addr", r.BrokerAddr, "topics", len(r.Topics.TopicConfigTable))
	}
	resp := ok(req)
	if res.MasterAddr != "" {
		resp.SetExt("masterAddr", res.MasterAddr)
		resp.SetExt("haServerAddr", res.HAServerAddr)
	}
	// As Java, every registration's answer carries the ORDER_TOPIC_CONFIG
	// table (none when the namespace was never written); brokers mark
	// those topics ordered.
	resp.Body = s.kv.ListJSON(OrderTopicConfigNamespace)
	return resp
}

func (s *Server) unregisterBroker(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	name, addr, cluster, id := e.String("brokerName"), e.String("brokerAddr"), e.String("clusterName"), e.Int64("brokerId")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	s.routes.UnregisterBroker(cluster, addr, name, id)
	s.log.Info("broker unregistered", "cluster", cluster, "broker", name, "id", id, "addr", addr)
	return ok(req)
}

func (s *Server) getRouteInfoByTopic(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic := e.String("topic")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	rd, found := s.routes.TopicRoute(topic)
	if !found {
		return remoting.NewResponse(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+topic)
	}
	bds := make([]*protocol.BrokerData, len(rd.BrokerDatas))
	for i := range rd.BrokerDatas {
		bds[i] = &rd.BrokerDatas[i]
	}
	if held := s.withholdMasters(bds); len(held) > 0 && !hasMaster(bds) {
		return sysErr(req, routeWithoutMaster, strings.Join(held, ", "))
	}
	rd.OrderTopicConf = s.orderTopicConf(topic)
	resp := ok(req)
	resp.Body = rd.Encode()
	return resp
}

func (s *Server) getBrokerClusterInfo(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	ci := s.routes.ClusterInfo()
	bds := make([]*protocol.BrokerData, 0, len(ci.BrokerAddrTable))
	for _, bd := range ci.BrokerAddrTable {
		bds = append(bds, bd)
	}
	s.withholdMasters(bds)
	return jsonResponse(req, ci)
}

func (s *Server) getAllTopicList(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	return jsonResponse(req, &protocol.TopicList{TopicList: s.routes.Topics()})
}

func (s *Server) getTopicsByCluster(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	cluster := e.String("cluster")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	return jsonResponse(req, &protocol.TopicList{TopicList: s.routes.TopicsByCluster(cluster)})
}

func (s *Server) deleteTopic(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, cluster := e.String("topic"), e.OptString("clusterName")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	s.routes.DeleteTopic(topic, cluster)
	s.log.Info("topic deleted", "topic", topic, "cluster", cluster)
	return ok(req)
}

func (s *Server) queryDataVersion(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	addr := e.String("brokerAddr")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	var dv protocol.DataVersion
	if err := json.Unmarshal(req.Body, &dv); err != nil {
		return sysErr(req, "namesrv: data version body: %v", err)
	}
	changed, stored := s.routes.QueryDataVersion(addr, dv)
	resp := ok(req)
	resp.SetExt("changed", strconv.FormatBool(changed))
	if stored != nil {
		resp.Body, _ = json.Marshal(stored)
	}
	return resp
}

// jsonResponse answers SUCCESS with v as a compact JSON body.
func jsonResponse(req *remoting.Command, v any) *remoting.Command {
	b, err := json.Marshal(v)
	if err != nil {
		return sysErr(req, "namesrv: encode response: %v", err)
	}
	resp := ok(req)
	resp.Body = b
	return resp
}
