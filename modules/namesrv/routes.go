package namesrv

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// BrokerRegistration is one REGISTER_BROKER request, decoded.
type BrokerRegistration struct {
	ClusterName  string
	BrokerName   string
	BrokerAddr   string
	BrokerID     int64
	HAServerAddr string
	// Topics is the broker's topic table and its data version.
	Topics protocol.TopicConfigWrapper
	// FilterServers are the broker's filter-server addresses (usually none).
	FilterServers []string
	// Peer is the connection the broker registered on; when it closes the
	// broker is dropped. Nil means no connection tracking.
	Peer *remoting.Peer
}

// RegisterResult is what a registration learned: for a slave, its
// master's addresses.
type RegisterResult struct {
	HAServerAddr string
	MasterAddr   string
	// New is true when the address was not live before.
	New bool
	// Replaced is the address of a live broker with the same name and id
	// that this registration replaced (another process started with the
	// same broker.name); empty otherwise.
	Replaced string
}

// LiveBroker is what the table knows about a registered broker address.
type LiveBroker struct {
	LastUpdate   time.Time
	DataVersion  protocol.DataVersion
	HAServerAddr string
	Peer         *remoting.Peer
}

// RouteTable is the name server's view of the cluster (Java
// RouteInfoManager): which brokers exist, where they listen and which
// topics they serve. It is safe for concurrent use.
type RouteTable struct {
	mu sync.RWMutex
	// now is the clock; read under mu.
	now func() time.Time
	// clusters: cluster name → broker names.
	clusters map[string]map[string]struct{}
	// brokers: broker name → cluster, name and addresses by broker id.
	brokers map[string]*protocol.BrokerData
	// topics: topic → broker name → queue layout.
	topics map[string]map[string]protocol.QueueData
	// live: broker address → liveness.
	live map[string]*LiveBroker
	// filterServers: broker address → its filter servers.
	filterServers map[string][]string
}

// NewRouteTable returns an empty table reading time from now (time.Now
// when nil).
func NewRouteTable(now func() time.Time) *RouteTable {
	if now == nil {
		now = time.Now
	}
	return &RouteTable{
		now:           now,
		clusters:      map[string]map[string]struct{}{},
		brokers:       map[string]*protocol.BrokerData{},
		topics:        map[string]map[string]protocol.QueueData{},
		live:          map[string]*LiveBroker{},
		filterServers: map[string][]string{},
	}
}

// SetClock replaces the clock (tests drive expiry with a fake one).
func (t *RouteTable) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	t.mu.Lock()
	t.now = now
	t.mu.Unlock()
}

// RegisterBroker records a broker (REGISTER_BROKER). Another id of the
// broker name with the same address is removed first (a slave promoted to
// master, or the reverse). For a master, the topics' queue data are
// upserted when its data version changed or it is new.
func (t *RouteTable) RegisterBroker(r BrokerRegistration) RegisterResult {
	t.mu.Lock()
	defer t.mu.Unlock()

	names := t.clusters[r.ClusterName]
	if names == nil {
		names = map[string]struct{}{}
		t.clusters[r.ClusterName] = names
	}
	names[r.BrokerName] = struct{}{}

	first := false
	bd := t.brokers[r.BrokerName]
	if bd == nil {
		first = true
		bd = &protocol.BrokerData{Cluster: r.ClusterName, BrokerName: r.BrokerName, BrokerAddrs: map[int64]string{}}
		t.brokers[r.BrokerName] = bd
	}
	for id, addr := range bd.BrokerAddrs {
		if addr == r.BrokerAddr && id != r.BrokerID {
			delete(bd.BrokerAddrs, id)
		}
	}
	replaced := ""
	if old, had := bd.BrokerAddrs[r.BrokerID]; !had {
		first = true
	} else if _, live := t.live[old]; live && old != r.BrokerAddr {
		replaced = old
	}
	bd.BrokerAddrs[r.BrokerID] = r.BrokerAddr

	if r.BrokerID == protocol.MasterID {
		prev, known := t.live[r.BrokerAddr]
		if first || !known || prev.DataVersion != r.Topics.DataVersion {
			for key, tc := range r.Topics.TopicConfigTable {
				if tc == nil {
					continue
				}
				name := tc.TopicName
				if name == "" {
					name = key
				}
				t.upsertQueueData(name, protocol.QueueData{
					BrokerName:     r.BrokerName,
					ReadQueueNums:  tc.ReadQueueNums,
					WriteQueueNums: tc.WriteQueueNums,
					Perm:           tc.Perm,
					TopicSysFlag:   tc.TopicSysFlag,
				})
			}
		}
	}

	_, wasLive := t.live[r.BrokerAddr]
	t.live[r.BrokerAddr] = &LiveBroker{
		LastUpdate:   t.now(),
		DataVersion:  r.Topics.DataVersion,
		HAServerAddr: r.HAServerAddr,
		Peer:         r.Peer,
	}
	if len(r.FilterServers) == 0 {
		delete(t.filterServers, r.BrokerAddr)
	} else {
		t.filterServers[r.BrokerAddr] = slices.Clone(r.FilterServers)
	}

	res := RegisterResult{New: !wasLive, Replaced: replaced}
	if r.BrokerID != protocol.MasterID {
		if master, ok := bd.BrokerAddrs[protocol.MasterID]; ok {
			if ml, ok := t.live[master]; ok {
				res.HAServerAddr = ml.HAServerAddr
				res.MasterAddr = master
			}
		}
	}
	return res
}

func (t *RouteTable) upsertQueueData(topic string, qd protocol.QueueData) {
	m := t.topics[topic]
	if m == nil {
		m = map[string]protocol.QueueData{}
		t.topics[topic] = m
	}
	m[qd.BrokerName] = qd
}

// UnregisterBroker removes one broker id (UNREGISTER_BROKER). When the
// broker name has no address left, its cluster membership and queue data go
// too.
func (t *RouteTable) UnregisterBroker(clusterName, brokerAddr, brokerName string, brokerID int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.live, brokerAddr)
	delete(t.filterServers, brokerAddr)
	bd := t.brokers[brokerName]
	if bd == nil {
		return
	}
	delete(bd.BrokerAddrs, brokerID)
	if len(bd.BrokerAddrs) > 0 {
		return
	}
	delete(t.brokers, brokerName)
	if names := t.clusters[clusterName]; names != nil {
		delete(names, brokerName)
		if len(names) == 0 {
			delete(t.clusters, clusterName)
		}
	}
	t.removeQueueDatas(brokerName)
}

// removeAddrLocked drops every trace of brokerAddr, as Java does when a
// broker's channel closes or expires: its liveness, its filter servers,
// its entries in every broker name, and for broker names left without
// addresses their cluster membership and queue data.
func (t *RouteTable) removeAddrLocked(brokerAddr string) {
	delete(t.live, brokerAddr)
	delete(t.filterServers, brokerAddr)
	for name, bd := range t.brokers {
		for id, addr := range bd.BrokerAddrs {
			if addr == brokerAddr {
				delete(bd.BrokerAddrs, id)
			}
		}
		if len(bd.BrokerAddrs) > 0 {
			continue
		}
		delete(t.brokers, name)
		for cluster, names := range t.clusters {
			delete(names, name)
			if len(names) == 0 {
				delete(t.clusters, cluster)
			}
		}
		t.removeQueueDatas(name)
	}
}

func (t *RouteTable) removeQueueDatas(brokerName string) {
	for topic, m := range t.topics {
		delete(m, brokerName)
		if len(m) == 0 {
			delete(t.topics, topic)
		}
	}
}

// Expire drops every broker not heard from within timeout and returns the
// live entries it removed, keyed by address, so the caller can close their
// connections.
func (t *RouteTable) Expire(timeout time.Duration) map[string]LiveBroker {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var out map[string]LiveBroker
	for addr, lb := range t.live {
		if now.Sub(lb.LastUpdate) <= timeout {
			continue
		}
		if out == nil {
			out = map[string]LiveBroker{}
		}
		out[addr] = *lb
		t.removeAddrLocked(addr)
	}
	return out
}

// DropConnection removes the brokers that registered on p, because the
// connection closed, and returns their addresses.
func (t *RouteTable) DropConnection(p *remoting.Peer) []string {
	if p == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for addr, lb := range t.live {
		if lb.Peer == p {
			out = append(out, addr)
		}
	}
	for _, addr := range out {
		t.removeAddrLocked(addr)
	}
	slices.Sort(out)
	return out
}

// TopicRoute returns the route of topic, or false when no queue data or
// none of its brokers is known (TOPIC_NOT_EXIST). Queue and broker data are
// sorted by broker name.
func (t *RouteTable) TopicRoute(topic string) (*protocol.TopicRouteData, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	qm := t.topics[topic]
	if len(qm) == 0 {
		return nil, false
	}
	rd := &protocol.TopicRouteData{
		QueueDatas:        make([]protocol.QueueData, 0, len(qm)),
		BrokerDatas:       make([]protocol.BrokerData, 0, len(qm)),
		FilterServerTable: map[string][]string{},
	}
	for _, name := range slices.Sorted(maps.Keys(qm)) {
		rd.QueueDatas = append(rd.QueueDatas, qm[name])
		bd := t.brokers[name]
		if bd == nil {
			continue
		}
		rd.BrokerDatas = append(rd.BrokerDatas, cloneBrokerData(bd))
		for _, addr := range bd.BrokerAddrs {
			if fs, ok := t.filterServers[addr]; ok {
				rd.FilterServerTable[addr] = slices.Clone(fs)
			}
		}
	}
	if len(rd.BrokerDatas) == 0 {
		return nil, false
	}
	return rd, true
}

func cloneBrokerData(bd *protocol.BrokerData) protocol.BrokerData {
	return protocol.BrokerData{Cluster: bd.Cluster, BrokerName: bd.BrokerName, BrokerAddrs: maps.Clone(bd.BrokerAddrs)}
}

// ClusterInfo returns the brokers and clusters (GET_BROKER_CLUSTER_INFO).
func (t *RouteTable) ClusterInfo() *protocol.ClusterInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ci := &protocol.ClusterInfo{
		BrokerAddrTable:  make(map[string]*protocol.BrokerData, len(t.brokers)),
		ClusterAddrTable: make(map[string][]string, len(t.clusters)),
	}
	for name, bd := range t.brokers {
		c := cloneBrokerData(bd)
		ci.BrokerAddrTable[name] = &c
	}
	for cluster, names := range t.clusters {
		ci.ClusterAddrTable[cluster] = slices.Sorted(maps.Keys(names))
	}
	return ci
}

// Topics lists every topic with queue data, sorted.
func (t *RouteTable) Topics() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.topics))
	for topic := range t.topics {
		out = append(out, topic)
	}
	slices.Sort(out)
	return out
}

// DeleteTopic removes topic's queue data (DELETE_TOPIC_IN_NAMESRV); with a
// cluster name, only that of the cluster's brokers.
func (t *RouteTable) DeleteTopic(topic, clusterName string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if clusterName == "" {
		delete(t.topics, topic)
		return
	}
	qm := t.topics[topic]
	if qm == nil {
		return
	}
	for name := range t.clusters[clusterName] {
		delete(qm, name)
	}
	if len(qm) == 0 {
		delete(t.topics, topic)
	}
}

// QueryDataVersion compares dv with the version brokerAddr last registered
// (QUERY_DATA_VERSION). An unchanged broker counts as heard from. stored is
// nil for an unknown broker.
func (t *RouteTable) QueryDataVersion(brokerAddr string, dv protocol.DataVersion) (changed bool, stored *protocol.DataVersion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lb, ok := t.live[brokerAddr]
	if !ok {
		return true, nil
	}
	changed = lb.DataVersion != dv
	if !changed {
		lb.LastUpdate = t.now()
	}
	v := lb.DataVersion
	return changed, &v
}

// Broker returns what the table knows about a broker address.
func (t *RouteTable) Broker(brokerAddr string) (LiveBroker, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	lb, ok := t.live[brokerAddr]
	if !ok {
		return LiveBroker{}, false
	}
	return *lb, true
}

// TopicsByCluster lists the topics with queue data on the cluster's
// brokers, sorted.
func (t *RouteTable) TopicsByCluster(clusterName string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := t.clusters[clusterName]
	out := []string{}
	for topic, qm := range t.topics {
		for name := range qm {
			if _, ok := names[name]; ok {
				out = append(out, topic)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
