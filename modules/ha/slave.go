package ha

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// The slave side: it finds its master, follows the master's commit log
// (HA_PULL in a loop, records appended at the master's offsets) and
// reports its lag. Copying the master's metadata is in copymeta.go.

// masterAddr is ha.master_addr or the master (id 0) of broker.name in
// the name servers' cluster info.
func (s *Service) masterAddr() string {
	if s.fo != nil {
		return s.fo.master()
	}
	if s.cfg.MasterAddr != "" {
		return s.cfg.MasterAddr
	}
	s.masterMu.Lock()
	m := s.master
	s.masterMu.Unlock()
	if m != "" {
		return m
	}
	bc := s.b.Config()
	for _, ns := range bc.Namesrv {
		ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
		resp, err := s.invoke(ctx, ns, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		cancel()
		if err != nil || resp.Code != remoting.Success {
			continue
		}
		var ci protocol.ClusterInfo
		if json.Unmarshal(resp.Body, &ci) != nil {
			continue
		}
		if bd := ci.BrokerAddrTable[bc.Name]; bd != nil && bd.BrokerAddrs[protocol.MasterID] != "" {
			m = bd.BrokerAddrs[protocol.MasterID]
			s.masterMu.Lock()
			s.master = m
			s.masterMu.Unlock()
			return m
		}
	}
	return ""
}

// switchMaster is called when the master to follow became addr: a pull
// running to another master is cancelled, and follow wakes up.
func (s *Service) switchMaster(addr string) {
	s.pullMu.Lock()
	if s.pullCancel != nil && s.pullMaster != addr {
		s.pullCancel()
	}
	s.pullMu.Unlock()
	select {
	case s.masterKick <- struct{}{}:
	default:
	}
}

// setPull records the running pull (cancel nil: none).
func (s *Service) setPull(master string, cancel context.CancelFunc) {
	s.pullMu.Lock()
	s.pullMaster, s.pullCancel = master, cancel
	s.pullMu.Unlock()
}

// sleepOrSwitch sleeps d, or less when the master to follow changes.
func (s *Service) sleepOrSwitch(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
	case <-s.masterKick:
	case <-t.C:
	}
}

func (s *Service) forgetMaster() {
	s.masterMu.Lock()
	s.master = ""
	s.masterMu.Unlock()
}

// follow is the slave's replication loop.
func (s *Service) follow() {
	failures := 0
	for s.ctx.Err() == nil {
		if s.fo != nil && !s.b.IsSlave() {
			if s.following.Swap(false) {
				s.log.Info("stopped following: not a slave now")
			}
			s.sleep(100 * time.Millisecond)
			continue
		}
		master := s.masterAddr()
		if master == "" {
			if s.following.Swap(false) && s.fo != nil {
				s.log.Warn("lost the master", "reason", "no committed master to follow")
			}
			if s.fo != nil {
				s.sleepOrSwitch(100 * time.Millisecond)
			} else {
				s.sleep(time.Second)
			}
			continue
		}
		role := s.b.Role()
		_, from := s.lr.LogOffsets()
		resp, err := s.pullOnce(master, from, role)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if s.fo != nil && s.fo.master() != master {
				// The controllers named another master: drop this one's
				// connection (it may be unreachable) and follow at once.
				if s.following.Swap(false) {
					s.log.Info("master changed: dropped the pull to the old master", "old_master", master, "master", s.fo.master())
				}
				s.client.CloseAddr(master)
				failures = 0
				continue
			}
			if failures == 0 || failures%30 == 0 {
				s.log.Warn("replicate from master", "master", master, "offset", from, "err", err)
			}
			failures++
			if s.following.Swap(false) {
				s.log.Warn("lost the master", "master", master)
			}
			s.client.CloseAddr(master)
			s.forgetMaster()
			s.sleep(500 * time.Millisecond)
			continue
		}
		failures = 0
		s.noteMetaVersions(master, resp)
		mm := remoting.ReadExt(resp).OptInt64("masterMax", 0)
		_, now := s.lr.LogOffsets()
		s.masterMax.Store(mm)
		s.lag.Store(max(0, mm-now))
		if !s.following.Swap(true) {
			s.log.Info("following master", "master", master, "offset", from, "master_max", mm)
		}
	}
}

// pullOnce sends one HA_PULL to master from this log's end from (in
// role's epoch) and appends the records it answers. A change of master
// cancels the request (switchMaster).
func (s *Service) pullOnce(master string, from int64, role broker.RoleState) (*remoting.Command, error) {
	req := remoting.NewRequest(HAPull, s.pullExt(master, from, role), nil)
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.MaxWait+5*time.Second)
	s.setPull(master, cancel)
	if s.fo != nil && s.fo.master() != master {
		cancel() // the master changed since it was read
	}
	resp, err := s.invoke(ctx, master, req)
	s.setPull("", nil)
	cancel()
	if err == nil && resp.Code != remoting.Success {
		err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
	}
	var recs [][]byte
	if err == nil {
		recs, err = splitRecords(resp.Body)
	}
	if err == nil && len(recs) > 0 {
		err = s.appendReplica(recs, master, role.Epoch)
	}
	return resp, err
}

// pullExt is an HA_PULL's extFields to master: this slave's log end
// from, who it is (under failover also its member id and epoch) and the
// versions of master's documents it last saw.
func (s *Service) pullExt(master string, from int64, role broker.RoleState) map[string]string {
	bc := s.b.Config()
	ext := map[string]string{
		"offset":     strconv.FormatInt(from, 10),
		"maxBytes":   strconv.FormatInt(int64(s.cfg.BatchBytes), 10),
		"brokerName": bc.Name,
		"brokerId":   strconv.FormatInt(role.ID, 10),
		"slaveAddr":  bc.AdvertiseAddr(),
	}
	if sv := s.metaSeen.Load(); sv != nil && sv.master == master {
		ext[metaVersionsExt] = sv.versions
	}
	if s.fo != nil {
		ext["memberId"] = strconv.FormatInt(bc.ID, 10)
		ext["epoch"] = strconv.FormatInt(role.Epoch, 10)
	}
	return ext
}

// appendReplica appends records from master; under failover only while
// this broker still follows master in epoch (a promotion stops it).
func (s *Service) appendReplica(recs [][]byte, master string, epoch int64) error {
	if s.fo == nil {
		return s.b.AppendReplica(s.ctx, recs)
	}
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	if !s.b.IsSlave() || s.b.Role().Epoch != epoch || s.fo.master() != master {
		return errStopped
	}
	return s.b.AppendReplica(s.ctx, recs)
}

// errStopped: the role changed while a replication answer was on its way.
var errStopped = errors.New("ha: no longer following that master")

func (s *Service) logLag() {
	if !s.following.Load() {
		return
	}
	_, end := s.lr.LogOffsets()
	s.log.Info("replication lag", "lag_bytes", s.lag.Load(), "slave_max", end, "master_max", s.masterMax.Load())
}

// splitRecords cuts a body of concatenated stored records.
func splitRecords(body []byte) ([][]byte, error) {
	var out [][]byte
	for len(body) > 0 {
		if len(body) < 4 {
			return nil, fmt.Errorf("ha: %d trailing bytes", len(body))
		}
		n := int(int32(binary.BigEndian.Uint32(body)))
		if n < 8 || n > len(body) {
			return nil, fmt.Errorf("ha: record of %d bytes in %d", n, len(body))
		}
		out = append(out, body[:n:n])
		body = body[n:]
	}
	return out, nil
}
