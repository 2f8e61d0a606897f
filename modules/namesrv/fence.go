package namesrv

import (
	"github.com/quivermq/quiver/core/protocol"
)

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

// MasterVouch reports whether the name server may answer addr as the
// master (id 0) of brokerName. The failover controller installs one
// (Controller.Vouch) that refuses, for a broker name under failover, a
// master its controller cannot confirm is the one of the current epoch
// with a raft majority: such a master is left out of route and cluster
// answers (its slaves stay), so clients do not write to a deposed master.
type MasterVouch func(brokerName, addr string) bool

// SetMasterVouch installs f (nil removes it). Call it before Start.
func (s *Server) SetMasterVouch(f MasterVouch) {
	s.mu.Lock()
	s.vouch = f
	s.mu.Unlock()
}

// MastersWithheld counts the masters left out of answers because the
// vouch refused them (one per broker data per answer).
func (s *Server) MastersWithheld() uint64 { return s.withheld.Load() }

// withholdMasters removes from bds every master the vouch refuses and
// reports the broker names it withheld; it logs each broker name's
// change between withheld and served.
func (s *Server) withholdMasters(bds []*protocol.BrokerData) (withheld []string) {
	s.mu.Lock()
	vouch := s.vouch
	s.mu.Unlock()
	if vouch == nil {
		return nil
	}
	for _, bd := range bds {
		addr, ok := bd.BrokerAddrs[protocol.MasterID]
		if !ok {
			continue
		}
		held := !vouch(bd.BrokerName, addr)
		if held {
			delete(bd.BrokerAddrs, protocol.MasterID)
			s.withheld.Add(1)
			withheld = append(withheld, bd.BrokerName)
		}
		s.heldMu.Lock()
		was := s.held[bd.BrokerName]
		switch {
		case held && was != addr:
			s.held[bd.BrokerName] = addr
			s.log.Warn("master withheld from answers: the controller cannot vouch for it (no raft majority confirmed the current epoch, or it is being deposed)",
				"broker", bd.BrokerName, "addr", addr)
		case !held && was != "":
			delete(s.held, bd.BrokerName)
			s.log.Info("master answered again: the controller vouches for it", "broker", bd.BrokerName, "addr", addr)
		}
		s.heldMu.Unlock()
	}
	return withheld
}

// routeWithoutMaster is the remark of a topic route refused because every
// master it would name is withheld. The official clients then keep the
// route they had (a periodic refresh) or ask the next name server (a new
// producer falls back to the default topic's route there); a route with
// no master at all would instead leave a producer without a queue until
// its next refresh (30 s). With other masters left, the route is answered
// without the withheld ones (their slaves stay readable).
const routeWithoutMaster = "this name server cannot vouch for the master of %s (its failover controller could not confirm the current epoch with a raft majority): ask another name server"

// hasMaster reports whether any of bds names a master.
func hasMaster(bds []*protocol.BrokerData) bool {
	for _, bd := range bds {
		if _, ok := bd.BrokerAddrs[protocol.MasterID]; ok {
			return true
		}
	}
	return false
}
