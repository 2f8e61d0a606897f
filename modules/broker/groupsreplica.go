package broker

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/quivermq/quiver/core/remoting"
)

// A slave keeps its master's subscription groups, as RocketMQ's
// SlaveSynchronize.syncSubscriptionGroupConfig does: a promoted slave (or
// one consumers read from) must know each group's retry times, retry
// policy, orderly and broadcast flags. The table is a replicated document
// (ReplicaMeta) answered by GET_ALL_SUBSCRIPTIONGROUP_CONFIG and
// versioned by its changes, so a change reaches the slaves at once.

// groupsReplicaMeta is the subscription-group document for replication.
func (b *Broker) groupsReplicaMeta() ReplicaMeta {
	return ReplicaMeta{Name: "subscription groups", Code: remoting.GetAllSubscriptionGroupConfig,
		Apply: b.applyMasterGroups, Version: b.groups.version.Load}
}

// applyMasterGroups makes the group table the master's (the body of its
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer): groups it has are written
// where they differ, groups it no longer has are removed.
func (b *Broker) applyMasterGroups(body []byte) error {
	var doc struct {
		SubscriptionGroupTable map[string]*GroupConfig `json:"subscriptionGroupTable"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("broker: master's subscription groups: %w", err)
	}
	if doc.SubscriptionGroupTable == nil {
		return fmt.Errorf("broker: master's subscription groups: no subscriptionGroupTable in %.100q", body)
	}
	cur := b.groups.snapshot()
	for name, gc := range doc.SubscriptionGroupTable {
		if gc == nil || gc.GroupName != name {
			continue
		}
		if old, ok := cur[name]; ok && reflect.DeepEqual(old, gc) {
			continue
		}
		if err := b.groups.put(gc); err != nil {
			return err
		}
	}
	for name := range cur {
		if _, ok := doc.SubscriptionGroupTable[name]; !ok {
			if err := b.groups.remove(name); err != nil {
				return err
			}
		}
	}
	return nil
}
