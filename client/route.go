package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// TopicRoute is a topic's route with the queues derived from it.
type TopicRoute struct {
	Topic string
	Data  *protocol.TopicRouteData
	// Publish are the writeable queues on brokers with a master, sorted by
	// broker name then queue id (or from orderTopicConf when set).
	Publish []MessageQueue
	// Subscribe are the readable queues.
	Subscribe []MessageQueue
	// Borrowed reports a route taken from TBW102 for a topic the name
	// servers do not know yet (auto-creation on first send).
	Borrowed bool
	Fetched  time.Time
}

// Brokers lists the broker names of the route, sorted.
func (r *TopicRoute) Brokers() []string {
	var out []string
	for _, b := range r.Data.BrokerDatas {
		out = append(out, b.BrokerName)
	}
	sort.Strings(out)
	return out
}

// ParseRoute decodes a GET_ROUTEINFO_BY_TOPIC body, accepting the
// unquoted numeric keys a Java name server writes
// (protocol.DecodeTopicRouteData).
func ParseRoute(body []byte) (*protocol.TopicRouteData, error) {
	rd, err := protocol.DecodeTopicRouteData(body)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return rd, nil
}

func buildRoute(topic string, rd *protocol.TopicRouteData) *TopicRoute {
	r := &TopicRoute{Topic: topic, Data: rd, Fetched: time.Now()}
	masters := map[string]bool{}
	for _, b := range rd.BrokerDatas {
		if b.BrokerAddrs[protocol.MasterID] != "" {
			masters[b.BrokerName] = true
		}
	}
	if rd.OrderTopicConf != "" {
		for _, part := range strings.Split(rd.OrderTopicConf, ";") {
			name, n, ok := strings.Cut(part, ":")
			cnt, err := strconv.Atoi(n)
			if !ok || err != nil {
				continue
			}
			for i := 0; i < cnt; i++ {
				r.Publish = append(r.Publish, MessageQueue{Topic: topic, BrokerName: name, QueueID: i})
			}
		}
	}
	qds := append([]protocol.QueueData(nil), rd.QueueDatas...)
	sort.Slice(qds, func(i, j int) bool { return qds[i].BrokerName < qds[j].BrokerName })
	for _, qd := range qds {
		if rd.OrderTopicConf == "" && qd.Perm&protocol.PermWrite != 0 && masters[qd.BrokerName] {
			for i := 0; i < int(qd.WriteQueueNums); i++ {
				r.Publish = append(r.Publish, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: i})
			}
		}
		if qd.Perm&protocol.PermRead != 0 {
			for i := 0; i < int(qd.ReadQueueNums); i++ {
				r.Subscribe = append(r.Subscribe, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: i})
			}
		}
	}
	return r
}

// FetchRoute asks the name servers for topic's route and caches it. A
// topic the name servers do not know gives an error wrapping ErrNoRoute
// (and a *BrokerError with TOPIC_NOT_EXIST).
func (c *Client) FetchRoute(ctx context.Context, topic string) (*TopicRoute, error) {
	rd, err := c.queryRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	r := buildRoute(topic, rd)
	c.storeRoute(r)
	return r, nil
}

func (c *Client) queryRoute(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	resp, addr, err := c.InvokeNameServer(ctx, func() *remoting.Command {
		return NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("client: route of %s: %w", topic, err)
	}
	switch {
	case resp.Code == remoting.TopicNotExist:
		return nil, fmt.Errorf("client: route of %s: %w: %w", topic, ErrNoRoute, NewBrokerError(addr, resp))
	case resp.Code != remoting.Success:
		return nil, fmt.Errorf("client: route of %s: %w", topic, NewBrokerError(addr, resp))
	case len(resp.Body) == 0:
		return nil, fmt.Errorf("client: route of %s: %w: empty body", topic, ErrNoRoute)
	}
	return ParseRoute(resp.Body)
}

func (c *Client) storeRoute(r *TopicRoute) {
	c.routeMu.Lock()
	c.routes[r.Topic] = r
	c.routeMu.Unlock()
	c.brokerMu.Lock()
	fresh := false
	for _, b := range r.Data.BrokerDatas {
		m := make(map[int64]string, len(b.BrokerAddrs))
		for id, a := range b.BrokerAddrs {
			m[id] = a
			if c.brokers[b.BrokerName][id] != a {
				fresh = true
			}
		}
		c.brokers[b.BrokerName] = m
	}
	c.brokerMu.Unlock()
	if fresh {
		// A broker we never heartbeated: tell it about our groups now, so
		// transaction checks and consumer lists find us.
		c.TriggerHeartbeat()
	}
}

// Route returns the cached route of topic, fetching it when absent.
func (c *Client) Route(ctx context.Context, topic string) (*TopicRoute, error) {
	c.routeMu.RLock()
	r := c.routes[topic]
	c.routeMu.RUnlock()
	if r != nil {
		return r, nil
	}
	return c.FetchRoute(ctx, topic)
}

// PublishRoute returns a route to send to topic. When the name servers
// do not know the topic it borrows TBW102's route, capped to queues
// queues per broker, so the broker auto-creates the topic on the first
// send (spec §10.2).
func (c *Client) PublishRoute(ctx context.Context, topic string, queues int) (*TopicRoute, error) {
	if r := c.CachedPublishRoute(topic); r != nil {
		return r, nil
	}
	r, err := c.FetchRoute(ctx, topic)
	if err == nil && len(r.Publish) > 0 {
		return r, nil
	}
	if err != nil && !errors.Is(err, ErrNoRoute) {
		return nil, err
	}
	rd, err2 := c.queryRoute(ctx, protocol.AutoCreateTopic)
	if err2 != nil {
		if err == nil {
			err = fmt.Errorf("client: topic %s has no writeable queue: %w", topic, ErrNoRoute)
		}
		return nil, fmt.Errorf("%w (and %s: %v)", err, protocol.AutoCreateTopic, err2)
	}
	for i := range rd.QueueDatas {
		q := &rd.QueueDatas[i]
		q.ReadQueueNums = min(q.ReadQueueNums, int32(queues))
		q.WriteQueueNums = min(q.WriteQueueNums, int32(queues))
	}
	r = buildRoute(topic, rd)
	r.Borrowed = true
	if len(r.Publish) == 0 {
		return nil, fmt.Errorf("client: topic %s: %w", topic, ErrNoRoute)
	}
	c.storeRoute(r)
	return r, nil
}

// ForgetRoute drops topic's cached route.
func (c *Client) ForgetRoute(topic string) {
	c.routeMu.Lock()
	delete(c.routes, topic)
	c.routeMu.Unlock()
}

// CachedPublishRoute is the cached route of topic when it has writeable
// queues, else nil; it never fetches.
func (c *Client) CachedPublishRoute(topic string) *TopicRoute {
	c.routeMu.RLock()
	r := c.routes[topic]
	c.routeMu.RUnlock()
	if r != nil && len(r.Publish) > 0 {
		return r
	}
	return nil
}

// BrokerAddr returns the master address of a broker.
func (c *Client) BrokerAddr(brokerName string) (string, bool) {
	c.brokerMu.RLock()
	defer c.brokerMu.RUnlock()
	a := c.brokers[brokerName][protocol.MasterID]
	return a, a != ""
}

// BrokerAddrFor returns the address to use for brokerName and broker id
// (a pull's suggested broker), falling back to id+1, then the master, then
// any address.
func (c *Client) BrokerAddrFor(brokerName string, id int64) (string, bool) {
	c.brokerMu.RLock()
	defer c.brokerMu.RUnlock()
	m := c.brokers[brokerName]
	for _, k := range []int64{id, id + 1, protocol.MasterID} {
		if a := m[k]; a != "" {
			return a, true
		}
	}
	for _, a := range m {
		return a, true
	}
	return "", false
}

// Brokers returns broker name → master address for every known broker.
func (c *Client) Brokers() map[string]string {
	c.brokerMu.RLock()
	defer c.brokerMu.RUnlock()
	out := map[string]string{}
	for name, m := range c.brokers {
		if a := m[protocol.MasterID]; a != "" {
			out[name] = a
		}
	}
	return out
}

func (c *Client) brokerAddrs(withSlaves bool) []string {
	c.brokerMu.RLock()
	defer c.brokerMu.RUnlock()
	var out []string
	for _, m := range c.brokers {
		for id, a := range m {
			if id == protocol.MasterID || withSlaves {
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (c *Client) routeLoop() {
	defer c.wg.Done()
	t := time.NewTimer(c.opts.firstRouteFetch)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.refreshRoutes()
		t.Reset(c.opts.routeRefresh)
	}
}

func (c *Client) refreshRoutes() {
	topics := map[string]bool{}
	c.routeMu.RLock()
	for t := range c.routes {
		topics[t] = true
	}
	c.routeMu.RUnlock()
	c.memberMu.RLock()
	for _, h := range c.consumers {
		for _, t := range h.SubscribedTopics() {
			topics[t] = true
		}
	}
	c.memberMu.RUnlock()
	for t := range topics {
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.namesrvTimeout)
		_, err := c.FetchRoute(ctx, t)
		cancel()
		if err != nil && c.ctx.Err() == nil {
			c.log.Debug("refresh route", "topic", t, "err", err)
		}
	}
}
