package admin

// Finding a message by id, as RocketMQ's admin tools do
// (DefaultMQAdminExtImpl.viewMessage: try the id as an offsetMsgId, then
// as a unique key with QUERY_MESSAGE), except that an address decoded from
// an id is dialled only when it is a registered broker's.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// ErrMessageNotFound reports that no broker holds a message with the id.
var ErrMessageNotFound = errors.New("admin: message not found")

// ErrBadMessageID reports an id that is no message id at all.
var ErrBadMessageID = errors.New("admin: malformed message id")

// maxMessageIDLen bounds the ids ViewMessage accepts: an IPv6
// offsetMsgId has 56 hex digits, a unique key (MessageClientIDSetter,
// the Go client's CreateUniqID) 32.
const maxMessageIDLen = 64

// FoundMessage is a message found by id and the broker holding it.
type FoundMessage struct {
	Message    *message.Ext
	BrokerName string
	BrokerAddr string
}

// ViewMessage finds the messages an id names. The id may be an
// offsetMsgId (SendResult.OffsetMsgID: store host and commit-log offset)
// or a msgId (SendResult.MsgID, the UNIQ_KEY property). Both have 32 hex
// digits for IPv4 hosts, so a msgId also decodes as an address (the
// producer's IP, its pid as the port). As Java's admin, ViewMessage first
// tries the id as an offsetMsgId (VIEW_MESSAGE_BY_ID), but only when the
// decoded address is one the name server lists for a broker; it never
// dials another address. Otherwise, or when that broker has no such
// message, it looks the id up as a unique key (QUERY_MESSAGE with
// _UNIQUE_KEY_QUERY) on every broker of topic, or with topic empty on
// every broker of the cluster for each topic the name server knows.
//
// A unique key can match several stored messages (a retried send, the
// copy in a retry, schedule or dead-letter topic); they are returned
// messages of ordinary topics first, then oldest first. With nothing
// found the error wraps ErrMessageNotFound.
func (a *Admin) ViewMessage(ctx context.Context, id, topic string) ([]FoundMessage, error) {
	id = strings.TrimSpace(id)
	if err := checkMessageID(id); err != nil {
		return nil, err
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("admin: view message %s: %w", id, err)
	}
	brokers := brokersOf(ci)
	var tried []string
	if host, off, ok := offsetMsgID(id); ok {
		if b, ok := brokers.byAddr[host.String()]; ok {
			m, err := a.viewByOffset(ctx, b.addr, off)
			if err == nil {
				return []FoundMessage{{Message: m, BrokerName: b.name, BrokerAddr: b.addr}}, nil
			}
			tried = append(tried, fmt.Sprintf("offset %d on %s: %v", off, b.name, err))
		}
	}
	found, err := a.viewByUniqKey(ctx, brokers, id, topic)
	if err != nil {
		return nil, fmt.Errorf("admin: view message %s: %w", id, err)
	}
	if len(found) == 0 {
		where := "on any broker of the cluster"
		if topic != "" {
			where = "in topic " + topic
		}
		msg := fmt.Sprintf("no offsetMsgId of a registered broker and no unique key %s", where)
		if len(tried) > 0 {
			msg = strings.Join(tried, "; ") + "; no unique key " + where
		}
		return nil, fmt.Errorf("%w: %s: %s", ErrMessageNotFound, id, msg)
	}
	return found, nil
}

// checkMessageID accepts hex digits only: every id RocketMQ clients and
// brokers make is hex, and anything else is a typo (or worse).
func checkMessageID(id string) error {
	if id == "" || len(id) > maxMessageIDLen {
		return fmt.Errorf("%w: %q: want 1 to %d hex digits", ErrBadMessageID, id, maxMessageIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return fmt.Errorf("%w: %q: want hex digits", ErrBadMessageID, id)
		}
	}
	return nil
}

// offsetMsgID decodes id as an offsetMsgId whose port fits 16 bits (a
// msgId decodes to a pid-based "port" that mostly does not: that id is
// then no offsetMsgId at all).
func offsetMsgID(id string) (netip.AddrPort, int64, bool) {
	host, off, err := message.ParseOffsetMsgID(id)
	if err != nil || !strings.EqualFold(message.OffsetMsgID(host, off), id) {
		return netip.AddrPort{}, 0, false
	}
	return host, off, true
}

// registered is one address per broker name of the cluster info (the
// master, else the lowest id), and every registered address.
type registered struct {
	names  []string // sorted
	addrOf map[string]string
	byAddr map[string]brokerAddr
}

type brokerAddr struct{ name, addr string }

func brokersOf(ci *ClusterInfo) registered {
	r := registered{addrOf: map[string]string{}, byAddr: map[string]brokerAddr{}}
	for name, ids := range ci.Brokers {
		best := int64(math.MaxInt64)
		for id, addr := range ids {
			if addr == "" {
				continue
			}
			r.byAddr[addr] = brokerAddr{name: name, addr: addr}
			if id < best {
				best, r.addrOf[name] = id, addr
			}
		}
		if _, ok := r.addrOf[name]; ok {
			r.names = append(r.names, name)
		}
	}
	sort.Strings(r.names)
	return r
}

// viewByOffset is VIEW_MESSAGE_BY_ID at a registered broker.
func (a *Admin) viewByOffset(ctx context.Context, addr string, off int64) (*message.Ext, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil))
	if err != nil {
		return nil, err
	}
	m, _, err := message.DecodeStored(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("decode answer of %s: %w", addr, err)
	}
	return m, nil
}

// viewByUniqKey asks every broker of topic (or of the cluster, for every
// topic) for the messages whose UNIQ_KEY is key.
func (a *Admin) viewByUniqKey(ctx context.Context, brokers registered, key, topic string) ([]FoundMessage, error) {
	var topics, names []string
	if topic != "" {
		r, err := a.c.FetchRoute(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("route of %s: %w", topic, err)
		}
		topics = []string{topic}
		for _, n := range r.Brokers() {
			if _, ok := brokers.addrOf[n]; ok {
				names = append(names, n)
			}
		}
	} else {
		var err error
		if topics, err = a.Topics(ctx); err != nil {
			return nil, err
		}
		names = brokers.names
	}
	type job struct{ topic, name string }
	var jobs []job
	for _, t := range topics {
		for _, n := range names {
			jobs = append(jobs, job{t, n})
		}
	}
	results := make([][]*message.Ext, len(jobs))
	err := forEach(ctx, len(jobs), lookupParallelism, func(ctx context.Context, i int) error {
		msgs, err := a.queryUniqKey(ctx, brokers.addrOf[jobs[i].name], jobs[i].topic, key)
		results[i] = msgs
		return err
	})
	if err != nil {
		return nil, err
	}
	type seenKey struct {
		addr string
		off  int64
	}
	seen := map[seenKey]bool{}
	var out []FoundMessage
	for i, msgs := range results {
		addr := brokers.addrOf[jobs[i].name]
		for _, m := range msgs {
			k := seenKey{addr, m.CommitLogOffset}
			if m.Topic != jobs[i].topic || m.Properties[message.PropertyUniqKey] != key || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, FoundMessage{Message: m, BrokerName: jobs[i].name, BrokerAddr: addr})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		si, sj := systemTopic(out[i].Message.Topic), systemTopic(out[j].Message.Topic)
		if si != sj {
			return sj
		}
		return out[i].Message.StoreTimestamp < out[j].Message.StoreTimestamp
	})
	return out, nil
}

// lookupParallelism bounds the QUERY_MESSAGE requests of one lookup in
// flight (one per topic and broker when no topic is given).
const lookupParallelism = 8

// forEach runs f(ctx, i) for i in [0, n) on at most par goroutines and
// returns the first error; once one fails, the rest are not started and
// ctx is cancelled for those running. It returns when all have returned.
func forEach(ctx context.Context, n, par int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w := 0; w < min(n, par); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil && n > 0 {
		first = ctx.Err()
	}
	return first
}

// queryUniqKey is QUERY_MESSAGE for a unique key over all time, as Java's
// MQAdminImpl.queryMessageByUniqKey sends it (maxNum 32; the broker
// raises it to its defaultQueryMaxNum for unique-key queries). A broker
// without the key or the topic answers none.
func (a *Admin) queryUniqKey(ctx context.Context, addr, topic, key string) ([]*message.Ext, error) {
	msgs, err := a.QueryMessage(ctx, addr, Query{Topic: topic, Key: key, MaxNum: 32, End: math.MaxInt64, UniqKey: true})
	if errors.Is(err, ErrMessageNotFound) || client.CodeOf(err) == remoting.TopicNotExist {
		return nil, nil
	}
	return msgs, err
}

// Query selects the messages QueryMessage asks a broker for.
type Query struct {
	Topic string
	// Key is a KEYS entry, or with UniqKey a msgId (the UNIQ_KEY
	// property).
	Key     string
	UniqKey bool
	// MaxNum bounds the answer (the broker caps it by its
	// defaultQueryMaxNum; for unique keys it raises it to that).
	MaxNum int
	// Begin and End bound the store time (epoch ms, inclusive).
	Begin, End int64
}

// QueryMessage finds the messages of q.Topic whose key is q.Key on the
// broker at addr (QUERY_MESSAGE, Java's QueryMessageRequestHeader; with
// q.UniqKey the _UNIQUE_KEY_QUERY field). The broker's index may return
// messages of other topics or keys sharing a hash: callers filter.
// Nothing found (QUERY_NOT_FOUND) is an error wrapping
// ErrMessageNotFound; another refusal wraps a *client.BrokerError.
func (a *Admin) QueryMessage(ctx context.Context, addr string, q Query) ([]*message.Ext, error) {
	ext := map[string]string{
		"topic": q.Topic, "key": q.Key, "maxNum": strconv.Itoa(q.MaxNum),
		"beginTimestamp": strconv.FormatInt(q.Begin, 10), "endTimestamp": strconv.FormatInt(q.End, 10),
	}
	if q.UniqKey {
		ext["_UNIQUE_KEY_QUERY"] = "true"
	}
	resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.QueryMessage, ext, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: query %s by key %s on %s: %w", q.Topic, q.Key, addr, err)
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.QueryNotFound:
		return nil, fmt.Errorf("admin: query %s by key %s on %s: %w: %w", q.Topic, q.Key, addr, ErrMessageNotFound, client.NewBrokerError(addr, resp))
	default:
		return nil, fmt.Errorf("admin: query %s by key %s on %s: %w", q.Topic, q.Key, addr, client.NewBrokerError(addr, resp))
	}
	msgs, err := message.DecodeAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("admin: decode query answer of %s: %w", addr, err)
	}
	return msgs, nil
}

// systemTopic reports the topics copies of a message land in (retry,
// dead-letter, schedule, transaction half and trace topics).
func systemTopic(t string) bool {
	return strings.HasPrefix(t, "%") || strings.HasPrefix(t, "rmq_sys_") || strings.HasPrefix(t, "RMQ_SYS_") ||
		protocol.IsSystemTopic(t)
}
