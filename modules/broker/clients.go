package broker

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// subscription is one topic subscription of a consumer group, compiled.
type subscription struct {
	data    protocol.SubscriptionData
	matcher filter.Matcher
}

type clientChannel struct {
	id         string
	peer       *remoting.Peer
	lastUpdate time.Time
}

type consumerGroup struct {
	name             string
	consumeType      string
	messageModel     string
	consumeFromWhere string
	clients          map[string]*clientChannel // by client id
	subs             map[string]*subscription  // by topic
}

type producerGroup struct {
	clients map[string]*clientChannel
}

// clientTable tracks producer and consumer channels from heartbeats and
// drops them when their connection closes or they fall silent.
type clientTable struct {
	mu        sync.RWMutex
	consumers map[string]*consumerGroup
	producers map[string]*producerGroup
	now       func() time.Time
}

func newClientTable() *clientTable {
	return &clientTable{consumers: map[string]*consumerGroup{}, producers: map[string]*producerGroup{}, now: time.Now}
}

// registerConsumer records a heartbeat's consumer group; it reports whether
// the group's set of clients changed.
func (t *clientTable) registerConsumer(p *remoting.Peer, clientID string, cd *protocol.ConsumerData, subs map[string]*subscription) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.consumers[cd.GroupName]
	if !ok {
		g = &consumerGroup{name: cd.GroupName, clients: map[string]*clientChannel{}, subs: map[string]*subscription{}}
		t.consumers[cd.GroupName] = g
	}
	g.consumeType, g.messageModel, g.consumeFromWhere = cd.ConsumeType, cd.MessageModel, cd.ConsumeFromWhere
	changed := false
	c, ok := g.clients[clientID]
	if !ok || c.peer != p {
		changed = true
		c = &clientChannel{id: clientID, peer: p}
		g.clients[clientID] = c
	}
	c.lastUpdate = t.now()
	for topic, s := range subs {
		old, ok := g.subs[topic]
		if !ok || old.data.SubVersion < s.data.SubVersion || old.data.SubString != s.data.SubString || old.data.ExpressionType != s.data.ExpressionType {
			g.subs[topic] = s
		}
	}
	// Topics no longer subscribed by this heartbeat are dropped, as Java
	// does, so an unsubscribed topic stops being served.
	for topic := range g.subs {
		if _, ok := subs[topic]; !ok {
			delete(g.subs, topic)
		}
	}
	return changed
}

func (t *clientTable) registerProducer(p *remoting.Peer, clientID, group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.producers[group]
	if !ok {
		g = &producerGroup{clients: map[string]*clientChannel{}}
		t.producers[group] = g
	}
	c, ok := g.clients[clientID]
	if !ok || c.peer != p {
		c = &clientChannel{id: clientID, peer: p}
		g.clients[clientID] = c
	}
	c.lastUpdate = t.now()
}

// subscriptionOf returns the group's compiled subscription of topic.
func (t *clientTable) subscriptionOf(group, topic string) (*subscription, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.consumers[group]
	if !ok {
		return nil, false
	}
	s, ok := g.subs[topic]
	return s, ok
}

// consumerIDs lists the group's client ids, sorted.
func (t *clientTable) consumerIDs(group string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.consumers[group]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(g.clients))
	for id := range g.clients {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func (t *clientTable) consumerPeers(group string) []*remoting.Peer {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.consumers[group]
	if !ok {
		return nil
	}
	out := make([]*remoting.Peer, 0, len(g.clients))
	for _, c := range g.clients {
		out = append(out, c.peer)
	}
	return out
}

// ProducerPeers lists live connections of a producer group.
func (t *clientTable) producerPeers(group string) []*remoting.Peer {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.producers[group]
	if !ok {
		return nil
	}
	out := make([]*remoting.Peer, 0, len(g.clients))
	for _, c := range g.clients {
		out = append(out, c.peer)
	}
	return out
}

func (t *clientTable) messageModel(group string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if g, ok := t.consumers[group]; ok {
		return g.messageModel
	}
	return ""
}

// unregister removes a client from groups (UNREGISTER_CLIENT); it returns
// the consumer groups whose membership changed.
func (t *clientTable) unregister(clientID, producerGroup, consumerGroup string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g, ok := t.producers[producerGroup]; ok {
		delete(g.clients, clientID)
		if len(g.clients) == 0 {
			delete(t.producers, producerGroup)
		}
	}
	var changed []string
	if g, ok := t.consumers[consumerGroup]; ok {
		if _, ok := g.clients[clientID]; ok {
			delete(g.clients, clientID)
			changed = append(changed, consumerGroup)
		}
		if len(g.clients) == 0 {
			delete(t.consumers, consumerGroup)
		}
	}
	return changed
}

// drop removes every channel matching; it returns the changed consumer
// groups.
func (t *clientTable) drop(match func(*clientChannel) bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var changed []string
	for name, g := range t.consumers {
		n := len(g.clients)
		for id, c := range g.clients {
			if match(c) {
				delete(g.clients, id)
			}
		}
		if len(g.clients) != n {
			changed = append(changed, name)
		}
		if len(g.clients) == 0 {
			delete(t.consumers, name)
		}
	}
	for name, g := range t.producers {
		for id, c := range g.clients {
			if match(c) {
				delete(g.clients, id)
			}
		}
		if len(g.clients) == 0 {
			delete(t.producers, name)
		}
	}
	return changed
}

func (t *clientTable) dropPeer(p *remoting.Peer) []string {
	return t.drop(func(c *clientChannel) bool { return c.peer == p })
}

func (t *clientTable) expire(maxAge time.Duration) []string {
	cut := t.now().Add(-maxAge)
	return t.drop(func(c *clientChannel) bool { return c.lastUpdate.Before(cut) })
}

// groups lists consumer group names.
func (t *clientTable) groups() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.consumers))
	for k := range t.consumers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// notifyChanged sends NOTIFY_CONSUMER_IDS_CHANGED to every consumer of
// each group.
func (b *Broker) notifyChanged(ctx context.Context, groups []string) {
	for _, g := range groups {
		for _, p := range b.clients.consumerPeers(g) {
			req := remoting.NewRequest(remoting.NotifyConsumerIDsChanged, map[string]string{"consumerGroup": g}, nil)
			if err := p.InvokeOneway(ctx, req); err != nil {
				b.log.Debug("notify consumer ids changed", "group", g, "remote", p.RemoteAddr(), "err", err)
			}
		}
	}
}
