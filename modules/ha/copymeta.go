package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// Copying the master's metadata (slave side): topic config (topics the
// master deleted are deleted here too), consumer offsets, and the
// documents other modules registered, each applied once this slave's log
// has caught up with what it counts.

// metaVersionsExt is the HA_PULL answer's extField naming the versions
// of the master's versioned documents: "21=<timestamp>.<counter>" (the
// topic table's data version) then ",<code>=<version>" for each
// broker.ReplicaMeta with a Version (ACL 2.0's users and policies).
const metaVersionsExt = "metaVersions"

// retryPending is how often a slave whose log has not reached a copied
// document's need tries again to apply it.
const retryPending = 100 * time.Millisecond

// metaVersions is what this master reports in HA_PULL answers.
func (s *Service) metaVersions() string {
	dv := s.b.TopicsVersion()
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d=%d.%d", remoting.GetAllTopicConfig, dv.Timestamp, dv.Counter)
	for _, m := range s.b.ReplicaMetas() {
		if m.Version != nil {
			fmt.Fprintf(&sb, ",%d=%d", m.Code, m.Version())
		}
	}
	return sb.String()
}

// seenVersions is the last metaVersions a slave read from master.
type seenVersions struct {
	master   string
	versions string
}

// noteMetaVersions records the versions an HA_PULL answer from master
// reported (follow's goroutine) and wakes the copy loop when they
// changed.
func (s *Service) noteMetaVersions(master string, resp *remoting.Command) {
	v := remoting.ReadExt(resp).OptString(metaVersionsExt)
	if v == "" {
		return // a master without versions: copied every ha.meta_interval
	}
	if old := s.metaSeen.Load(); old != nil && old.master == master && old.versions == v {
		return
	}
	s.metaSeen.Store(&seenVersions{master: master, versions: v})
	select {
	case s.metaKick <- struct{}{}:
	default:
	}
}

// parseVersions splits a metaVersions value into code → version.
func parseVersions(v string) map[int32]string {
	out := map[int32]string{}
	for part := range strings.SplitSeq(v, ",") {
		k, ver, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		code, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			continue
		}
		out[int32(code)] = ver
	}
	return out
}

// copyLoop copies the master's metadata: everything every
// ha.meta_interval, and, as soon as an HA_PULL answer reports a changed
// version, only the documents whose version changed.
func (s *Service) copyLoop() {
	t := time.NewTicker(s.cfg.MetaInterval)
	defer t.Stop()
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	s.copyMeta(true)
	for {
		var retryC <-chan time.Time
		if len(s.pendingMeta) > 0 {
			if retry == nil {
				retry = time.NewTimer(retryPending)
			}
			retryC = retry.C
		} else if retry != nil {
			retry.Stop()
			retry = nil
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.copyMeta(true)
		case <-s.metaKick:
			s.copyMeta(false)
		case <-retryC:
			retry = nil
			if s.b.IsSlave() {
				s.applyReady()
			}
		}
	}
}

// copyMeta copies the master's topic config, consumer offsets and the
// documents other modules registered (broker.ReplicaMeta: delay progress,
// ACL 2.0) when full; otherwise only the versioned documents whose
// version the master reported changed since their last copy.
func (s *Service) copyMeta(full bool) {
	if !s.b.IsSlave() {
		return
	}
	master := s.masterAddr()
	if master == "" {
		return
	}
	if s.copiedFrom != master {
		s.copied, s.copiedFrom = map[int32]string{}, master
	}
	// The versions are read before the copies: a change during a copy
	// is reported again and copied again.
	var seen map[int32]string
	if sv := s.metaSeen.Load(); sv != nil && sv.master == master {
		seen = parseVersions(sv.versions)
	}
	if !full && seen == nil {
		return
	}
	changed := func(code int32) bool { // a document the master does not version waits for a full copy
		v, ok := seen[code]
		return full || (ok && s.copied[code] != v)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	if changed(remoting.GetAllTopicConfig) {
		if err := s.copyTopics(ctx, master); err != nil {
			s.log.Debug("copy topic config from master", "err", err)
			return
		}
		if v, ok := seen[remoting.GetAllTopicConfig]; ok {
			s.copied[remoting.GetAllTopicConfig] = v
		}
	}
	if full {
		table, err := s.fetchOffsets(master)
		if err != nil {
			s.log.Debug("copy consumer offsets from master", "err", err)
			return
		}
		s.b.MergeConsumerOffsets(table)
	}
	for _, code := range s.copyDocs(ctx, master, func(m broker.ReplicaMeta) bool {
		return full || (m.Version != nil && changed(m.Code))
	}) {
		if v, ok := seen[code]; ok {
			s.copied[code] = v
		}
	}
}

// copyTopics copies the master's topic table and deletes the topics it
// no longer holds.
func (s *Service) copyTopics(ctx context.Context, master string) error {
	resp, err := s.invoke(ctx, master, remoting.NewRequest(remoting.GetAllTopicConfig, nil, nil))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("ha: GET_ALL_TOPIC_CONFIG: code %d: %s", resp.Code, resp.Remark)
	}
	var w protocol.TopicConfigWrapper
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return fmt.Errorf("ha: GET_ALL_TOPIC_CONFIG: %w", err)
	}
	n, err := s.b.ApplyTopicConfigs(w)
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.Info("copied topic config from master", "changed", n)
	}
	return s.deleteGoneTopics(ctx, master, w)
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
//
// It copies the documents want accepts and returns the codes fetched.
func (s *Service) copyDocs(ctx context.Context, master string, want func(broker.ReplicaMeta) bool) []int32 {
	metas := s.b.ReplicaMetas()
	if len(metas) == 0 {
		return nil
	}
	if len(s.pendingMeta) > 0 && s.pendingMeta[0].from != master {
		s.pendingMeta = nil // another master: its offsets are another log's
	}
	var got []pendingDoc
	for _, m := range metas {
		if !want(m) {
			continue
		}
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
	s.applyReady()
	codes := make([]int32, 0, len(got))
	for _, d := range got {
		codes = append(codes, d.meta.Code)
	}
	return codes
}

// applyReady applies the pending documents this slave's log has caught
// up with.
func (s *Service) applyReady() {
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
