package namesrv

import "github.com/quivermq/quiver/core/protocol"

// EpochExt is the REGISTER_BROKER extField in which a broker under
// automatic failover (ha.failover) names the controller epoch it serves.
// RocketMQ brokers never send it.
const EpochExt = "quiverEpoch"

// RegisterCheck decides whether a registration may enter the route table:
// epoch is the EpochExt value (hasEpoch false when absent). A non-nil error
// refuses the registration with its text. The failover controller
// (modules/controller) installs one that refuses a master (id 0) whose
// epoch and address are not the committed ones.
type RegisterCheck func(r BrokerRegistration, epoch int64, hasEpoch bool) error

// SetRegisterCheck installs f (nil removes it). Call it before Start.
func (s *Server) SetRegisterCheck(f RegisterCheck) {
	s.mu.Lock()
	s.check = f
	s.mu.Unlock()
}

func (s *Server) registerCheck() RegisterCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check
}

// DropMaster removes the master (id 0) of brokerName unless it is at
// keepAddr: a new master was elected elsewhere. Its other ids stay. It
// reports the address it removed ("" when none).
func (t *RouteTable) DropMaster(brokerName, keepAddr string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	bd := t.brokers[brokerName]
	if bd == nil {
		return ""
	}
	addr, ok := bd.BrokerAddrs[protocol.MasterID]
	if !ok || addr == keepAddr {
		return ""
	}
	delete(bd.BrokerAddrs, protocol.MasterID)
	if len(bd.BrokerAddrs) == 0 {
		delete(t.brokers, brokerName)
		for cluster, names := range t.clusters {
			delete(names, brokerName)
			if len(names) == 0 {
				delete(t.clusters, cluster)
			}
		}
		t.removeQueueDatas(brokerName)
	}
	return addr
}
