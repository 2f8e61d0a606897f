// Package admin manages topics and inspects consumer groups: topic
// create/delete/list, routes, consumer progress and group membership.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Admin issues administrative requests through a client.
type Admin struct{ c *client.Client }

// New returns an Admin using c.
func New(c *client.Client) *Admin { return &Admin{c: c} }

// TopicConfig describes a topic to create.
type TopicConfig struct {
	Topic          string
	ReadQueueNums  int // default 8
	WriteQueueNums int // default 8
	Perm           int // default 6 (read|write)
	Order          bool
	// Attributes modifies RocketMQ 5's topic attributes, in mqadmin's
	// -a syntax: "+key=value" adds or changes, "-key" deletes, several
	// comma-separated (e.g. "+message.type=FIFO"; protocol.TopicConfig
	// has the resulting attributes). Empty leaves them as they are.
	Attributes string
	// Brokers are broker addresses to create it on; empty means every
	// master of the cluster (from the name server's cluster info).
	Brokers []string
}

// ClusterInfo is the name server's view of brokers.
type ClusterInfo struct {
	// Brokers maps broker name → broker id → address.
	Brokers map[string]map[int64]string
	// Clusters maps cluster name → broker names.
	Clusters map[string][]string
}

// ClusterInfo asks a name server for the brokers it knows.
func (a *Admin) ClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	resp, addr, err := a.c.InvokeNameServer(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.GetBrokerClusterInfo, nil, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("admin: cluster info: %w", err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("admin: cluster info: %w", client.NewBrokerError(addr, resp))
	}
	var ci protocol.ClusterInfo
	if err := json.Unmarshal(resp.Body, &ci); err != nil {
		return nil, fmt.Errorf("admin: decode cluster info: %w", err)
	}
	out := &ClusterInfo{Brokers: map[string]map[int64]string{}, Clusters: ci.ClusterAddrTable}
	for name, bd := range ci.BrokerAddrTable {
		if bd != nil {
			out.Brokers[name] = bd.BrokerAddrs
		}
	}
	return out, nil
}

func (a *Admin) masters(ctx context.Context) ([]string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ci.Brokers {
		if addr := m[protocol.MasterID]; addr != "" {
			out = append(out, addr)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, errors.New("admin: no master broker registered")
	}
	return out, nil
}

func (a *Admin) invokeOK(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	resp, err := a.c.Invoke(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, client.NewBrokerError(addr, resp)
	}
	return resp, nil
}

// CreateTopic creates or updates a topic on brokers (UPDATE_AND_CREATE_TOPIC).
func (a *Admin) CreateTopic(ctx context.Context, tc TopicConfig) error {
	if err := protocol.ValidateTopic(tc.Topic); err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if tc.ReadQueueNums == 0 {
		tc.ReadQueueNums = 8
	}
	if tc.WriteQueueNums == 0 {
		tc.WriteQueueNums = 8
	}
	if tc.Perm == 0 {
		tc.Perm = protocol.PermRead | protocol.PermWrite
	}
	brokers := tc.Brokers
	if len(brokers) == 0 {
		var err error
		if brokers, err = a.masters(ctx); err != nil {
			return fmt.Errorf("admin: create topic %s: %w", tc.Topic, err)
		}
	}
	for _, addr := range brokers {
		req := client.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
			"topic": tc.Topic, "defaultTopic": "defaultTopic",
			"readQueueNums": strconv.Itoa(tc.ReadQueueNums), "writeQueueNums": strconv.Itoa(tc.WriteQueueNums),
			"perm": strconv.Itoa(tc.Perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
			"order": strconv.FormatBool(tc.Order),
			// As Java's admin: always, "" for no modification.
			"attributes": tc.Attributes,
		}, nil)
		if _, err := a.invokeOK(ctx, addr, req); err != nil {
			return fmt.Errorf("admin: create topic %s: %w", tc.Topic, err)
		}
	}
	a.c.ForgetRoute(tc.Topic)
	return nil
}

// DeleteTopic deletes a topic on every broker of its route and on every
// name server.
func (a *Admin) DeleteTopic(ctx context.Context, topic string) error {
	brokers, err := a.masters(ctx)
	if err != nil {
		return fmt.Errorf("admin: delete topic %s: %w", topic, err)
	}
	if r, err := a.c.FetchRoute(ctx, topic); err == nil {
		brokers = brokers[:0]
		for _, name := range r.Brokers() {
			if addr, ok := a.c.BrokerAddr(name); ok {
				brokers = append(brokers, addr)
			}
		}
	}
	for _, addr := range brokers {
		if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil)); err != nil {
			return fmt.Errorf("admin: delete topic %s: %w", topic, err)
		}
	}
	for _, ns := range a.c.NameServers() {
		if _, err := a.invokeOK(ctx, ns, client.NewRequest(remoting.DeleteTopicInNamesrv, map[string]string{"topic": topic}, nil)); err != nil {
			return fmt.Errorf("admin: delete topic %s: %w", topic, err)
		}
	}
	a.c.ForgetRoute(topic)
	return nil
}

// Topics lists every topic the name server knows.
func (a *Admin) Topics(ctx context.Context) ([]string, error) {
	resp, addr, err := a.c.InvokeNameServer(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("admin: topic list: %w", err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("admin: topic list: %w", client.NewBrokerError(addr, resp))
	}
	var tl protocol.TopicList
	if err := json.Unmarshal(resp.Body, &tl); err != nil {
		return nil, fmt.Errorf("admin: decode topic list: %w", err)
	}
	sort.Strings(tl.TopicList)
	return tl.TopicList, nil
}

// Route returns a topic's route, fresh from the name server.
func (a *Admin) Route(ctx context.Context, topic string) (*client.TopicRoute, error) {
	return a.c.FetchRoute(ctx, topic)
}

// QueueProgress is one queue's consumption state.
type QueueProgress struct {
	Queue client.MessageQueue
	// BrokerOffset is the next write offset; ConsumerOffset the group's
	// committed offset (-1 when none); Lag their difference.
	BrokerOffset   int64
	ConsumerOffset int64
	Lag            int64
}

// ConsumerProgress reports, for each queue of the topics, the broker's
// max offset, the group's committed offset and the lag.
func (a *Admin) ConsumerProgress(ctx context.Context, group string, topics ...string) ([]QueueProgress, error) {
	var out []QueueProgress
	for _, t := range topics {
		r, err := a.c.FetchRoute(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("admin: consumer progress: %w", err)
		}
		for _, mq := range r.Subscribe {
			addr, ok := a.c.BrokerAddr(mq.BrokerName)
			if !ok {
				return nil, fmt.Errorf("admin: consumer progress: %w: %s", client.ErrBrokerNotFound, mq.BrokerName)
			}
			ext := func() map[string]string {
				return map[string]string{"topic": mq.Topic, "queueId": strconv.Itoa(mq.QueueID), "bname": mq.BrokerName}
			}
			resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetMaxOffset, ext(), nil))
			if err != nil {
				return nil, fmt.Errorf("admin: consumer progress of %s: %w", mq, err)
			}
			qp := QueueProgress{Queue: mq, ConsumerOffset: -1}
			qp.BrokerOffset, _ = strconv.ParseInt(resp.Ext("offset"), 10, 64)
			e := ext()
			e["consumerGroup"] = group
			resp, err = a.c.Invoke(ctx, addr, client.NewRequest(remoting.QueryConsumerOffset, e, nil))
			if err != nil {
				return nil, fmt.Errorf("admin: consumer progress of %s: %w", mq, err)
			}
			if resp.Code == remoting.Success {
				qp.ConsumerOffset, _ = strconv.ParseInt(resp.Ext("offset"), 10, 64)
				qp.Lag = max(qp.BrokerOffset-qp.ConsumerOffset, 0)
			} else {
				qp.Lag = qp.BrokerOffset
			}
			out = append(out, qp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Queue, out[j].Queue
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
	return out, nil
}

// ConsumerIDs lists the client ids of a group's online consumers, as the
// brokers see them (union over all masters), sorted.
func (a *Admin) ConsumerIDs(ctx context.Context, group string) ([]string, error) {
	brokers, err := a.masters(ctx)
	if err != nil {
		return nil, fmt.Errorf("admin: consumer ids: %w", err)
	}
	set := map[string]bool{}
	for _, addr := range brokers {
		resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil))
		if err != nil {
			return nil, fmt.Errorf("admin: consumer ids: %w", err)
		}
		if resp.Code != remoting.Success {
			continue // "no consumer for this group"
		}
		var l protocol.ConsumerIDList
		if err := json.Unmarshal(resp.Body, &l); err != nil {
			return nil, fmt.Errorf("admin: decode consumer ids: %w", err)
		}
		for _, id := range l.ConsumerIDList {
			set[id] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// ResetOffset rewinds (or forwards) group's offsets of topic to the first
// message stored at or after t on every broker (INVOKE_BROKER_TO_RESET_OFFSET,
// 222); brokers tell online consumers with RESET_CONSUMER_CLIENT_OFFSET.
// It returns the new offset of each queue.
func (a *Admin) ResetOffset(ctx context.Context, group, topic string, t time.Time, force bool) (map[client.MessageQueue]int64, error) {
	r, err := a.c.FetchRoute(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("admin: reset offset: %w", err)
	}
	out := map[client.MessageQueue]int64{}
	for _, name := range r.Brokers() {
		addr, ok := a.c.BrokerAddr(name)
		if !ok {
			continue
		}
		resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.InvokeBrokerToResetOffset, map[string]string{
			"topic": topic, "group": group, "timestamp": strconv.FormatInt(t.UnixMilli(), 10), "isForce": strconv.FormatBool(force),
		}, nil))
		if err != nil {
			return nil, fmt.Errorf("admin: reset offset of %s on %s: %w", topic, name, err)
		}
		if len(resp.Body) > 0 {
			tbl, err := client.ParseOffsetTable(resp.Body)
			if err != nil {
				return nil, fmt.Errorf("admin: reset offset: %w", err)
			}
			for k, v := range tbl {
				out[k] = v
			}
		}
	}
	return out, nil
}
