package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// Copying the master's metadata (slave side): topic config (topics the
// master deleted are deleted here too), consumer offsets, and the
// documents other modules registered, each applied once this slave's log
// has caught up with what it counts.

// copyMeta copies the master's topic config, consumer offsets and the
// documents other modules registered (broker.ReplicaMeta: delay progress).
func (s *Service) copyMeta() {
	if !s.b.IsSlave() {
		return
	}
	master := s.masterAddr()
	if master == "" {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	resp, err := s.invoke(ctx, master, remoting.NewRequest(remoting.GetAllTopicConfig, nil, nil))
	if err == nil && resp.Code == remoting.Success {
		var w protocol.TopicConfigWrapper
		if err = json.Unmarshal(resp.Body, &w); err == nil {
			var n int
			if n, err = s.b.ApplyTopicConfigs(w); err == nil && n > 0 {
				s.log.Info("copied topic config from master", "changed", n)
			}
			if err == nil {
				err = s.deleteGoneTopics(ctx, master, w)
			}
		}
	}
	if err != nil {
		s.log.Debug("copy topic config from master", "err", err)
		return
	}
	table, err := s.fetchOffsets(master)
	if err != nil {
		s.log.Debug("copy consumer offsets from master", "err", err)
		return
	}
	s.b.MergeConsumerOffsets(table)
	s.copyDocs(ctx, master)
}

// pendingDoc is a master's document and the master's log end read after
// it: what the document counts (a delivered delayed message) is in the
// master's log below need.
type pendingDoc struct {
	meta broker.ReplicaMeta
	body []byte
	need int64
	from string
}

// maxPendingDocs bounds the documents kept per slave while it lags.
const maxPendingDocs = 16

// copyDocs fetches the documents other modules registered
// (broker.ReplicaMeta) and applies each once this slave's log holds
// everything the master's log held when the document was read: delay
// progress that counts a delivery this slave has not replicated yet would
// make a promoted slave skip it. A lagging slave keeps the documents
// (bounded) and applies the newest one it has caught up with.
func (s *Service) copyDocs(ctx context.Context, master string) {
	metas := s.b.ReplicaMetas()
	if len(metas) == 0 {
		return
	}
	if len(s.pendingMeta) > 0 && s.pendingMeta[0].from != master {
		s.pendingMeta = nil // another master: its offsets are another log's
	}
	var got []pendingDoc
	for _, m := range metas {
		resp, err := s.invoke(ctx, master, remoting.NewRequest(m.Code, nil, nil))
		switch {
		case err != nil:
			s.log.Debug("copy from master", "document", m.Name, "err", err)
			continue
		case resp.Code != remoting.Success:
			s.log.Debug("copy from master refused", "document", m.Name, "code", resp.Code, "remark", resp.Remark)
			continue
		}
		got = append(got, pendingDoc{meta: m, body: resp.Body, from: master})
	}
	if len(got) > 0 {
		need, err := s.masterLogEnd(ctx, master)
		if err != nil {
			s.log.Debug("master's log end for copied documents", "err", err)
			got = nil
		}
		for i := range got {
			got[i].need = need
		}
	}
	s.pendingMeta = append(s.pendingMeta, got...)
	if n := len(s.pendingMeta) - maxPendingDocs; n > 0 {
		s.pendingMeta = append(s.pendingMeta[:0], s.pendingMeta[n:]...)
	}
	_, end := s.lr.LogOffsets()
	var apply []pendingDoc
	apply, s.pendingMeta = readyDocs(s.pendingMeta, end)
	for _, d := range apply {
		if err := d.meta.Apply(d.body); err != nil {
			s.log.Warn("apply the master's document", "document", d.meta.Name, "err", err)
		}
	}
}

// readyDocs splits pending (oldest first) into the documents to apply
// with the slave's log ending at end — per request code, the newest copy
// whose need end has reached — and those to keep: the copies newer than
// it, which still wait. Older copies of an applied document are dropped.
func readyDocs(pending []pendingDoc, end int64) (apply, keep []pendingDoc) {
	latest := map[int32]int{}
	for i, d := range pending {
		if d.need <= end {
			latest[d.meta.Code] = i
		}
	}
	for i, d := range pending {
		j, ok := latest[d.meta.Code]
		switch {
		case ok && i == j:
			apply = append(apply, d)
		case ok && i < j:
			// superseded by a newer copy that applies
		default:
			keep = append(keep, d)
		}
	}
	return apply, keep
}

// masterLogEnd asks master for its commit log's end
// (GET_BROKER_RUNTIME_INFO commitLogMaxOffset).
func (s *Service) masterLogEnd(ctx context.Context, master string) (int64, error) {
	resp, err := s.invoke(ctx, master, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
	if err != nil {
		return 0, err
	}
	if resp.Code != remoting.Success {
		return 0, fmt.Errorf("ha: GET_BROKER_RUNTIME_INFO: code %d: %s", resp.Code, resp.Remark)
	}
	var doc struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return 0, fmt.Errorf("ha: GET_BROKER_RUNTIME_INFO: %w", err)
	}
	v, ok := doc.Table["commitLogMaxOffset"]
	if !ok {
		return 0, errors.New("ha: GET_BROKER_RUNTIME_INFO: no commitLogMaxOffset")
	}
	return strconv.ParseInt(v, 10, 64)
}

// deleteGoneTopics deletes on this slave the topics that master's table
// held at the previous copy and no longer holds (deleted on the master).
// Only topics seen on the master are candidates: after a restart or a
// change of master the first copy deletes nothing, so a topic deleted on
// the master while this slave was away stays here.
func (s *Service) deleteGoneTopics(ctx context.Context, master string, w protocol.TopicConfigWrapper) error {
	now := make(map[string]bool, len(w.TopicConfigTable))
	for name, tc := range w.TopicConfigTable {
		if tc != nil && tc.TopicName != "" {
			name = tc.TopicName
		}
		now[name] = true
	}
	prev, prevMaster := s.masterTopics, s.masterTopicsFrom
	s.masterTopics, s.masterTopicsFrom = now, master
	if prevMaster != master {
		return nil
	}
	for name := range prev {
		if now[name] {
			continue
		}
		removed, err := s.b.DeleteReplicaTopic(ctx, name)
		if err != nil {
			return err
		}
		if removed {
			s.log.Info("deleted topic the master deleted", "topic", name)
		}
	}
	return nil
}
