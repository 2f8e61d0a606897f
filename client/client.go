package client

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
)

// Wire identity of the official Go client, which we reproduce.
const (
	Language = "GO"
	Version  = 317
)

// ProducerHandler is what a registered producer group answers for.
type ProducerHandler interface {
	// CheckTransaction handles CHECK_TRANSACTION_STATE (39) from the
	// broker on peer p; it answers with END_TRANSACTION itself.
	CheckTransaction(ctx context.Context, p *remoting.Peer, req *remoting.Command)
}

// ConsumerHandler is what a registered consumer group answers for.
type ConsumerHandler interface {
	// ConsumerData is the group's heartbeat entry.
	ConsumerData() HeartbeatConsumer
	// SubscribedTopics lists the topics whose routes must stay fresh.
	SubscribedTopics() []string
	// IDsChanged is called on NOTIFY_CONSUMER_IDS_CHANGED (40).
	IDsChanged()
	// ResetOffset handles RESET_CONSUMER_CLIENT_OFFSET (220).
	ResetOffset(topic string, offsets map[MessageQueue]int64)
	// Offsets reports the group's in-memory offsets of topic (221).
	Offsets(topic string) map[MessageQueue]int64
}

// Client is the shared core. It is safe for concurrent use.
type Client struct {
	opts     options
	id       string
	scheme   string
	log      *slog.Logger
	rc       *remoting.Client
	nsNext   atomic.Uint32
	hbNow    chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closed   atomic.Bool
	brokerMu sync.RWMutex
	// brokers maps broker name → broker id → address (from routes).
	brokers map[string]map[int64]string
	routeMu sync.RWMutex
	routes  map[string]*TopicRoute

	hbMu      sync.Mutex
	memberMu  sync.RWMutex
	producers map[string]ProducerHandler
	consumers map[string]ConsumerHandler

	// migr holds the connections Migrate moves (migrate.go).
	migr migrators
	// replies holds requests waiting for their reply (reply.go).
	replies replyTable
}

var instanceSeq atomic.Int64

// New returns a started client: its route refresh and heartbeat loops run
// until Close.
func New(opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if len(o.nameServers) == 0 {
		if env := os.Getenv("NAMESRV_ADDR"); env != "" {
			o.nameServers = strings.Split(env, ";")
		}
	}
	if len(o.nameServers) == 0 {
		return nil, ErrNoNameServer
	}
	if o.dial == nil {
		return nil, errors.New("client: no dialer: pass client.WithDialer (see client/transports)")
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.instance == "" {
		n := instanceSeq.Add(1)
		o.instance = strconv.Itoa(os.Getpid())
		if n > 1 {
			o.instance += "#" + strconv.FormatInt(n, 10)
		}
	}
	scheme, _ := transport.SplitScheme(o.nameServers[0])
	c := &Client{
		opts:      o,
		id:        clientIP4().String() + "@" + o.instance,
		scheme:    scheme,
		hbNow:     make(chan struct{}, 1),
		brokers:   map[string]map[int64]string{},
		routes:    map[string]*TopicRoute{},
		producers: map[string]ProducerHandler{},
		consumers: map[string]ConsumerHandler{},
	}
	c.log = o.log.With("component", "client", "clientId", c.id)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ns := map[string]bool{}
	for _, a := range o.nameServers {
		ns[a] = true
	}
	dial := func(ctx context.Context, addr string) (transport.Conn, error) {
		conn, err := o.dial(ctx, addr)
		if err == nil {
			c.migr.track(addr, conn)
		}
		if err == nil && !ns[addr] {
			// A new connection to a broker, perhaps a restarted one that
			// forgot our groups: heartbeat soon.
			c.TriggerHeartbeat()
		}
		return conn, err
	}
	c.rc = remoting.NewClient(dial, remoting.HandlerFunc(c.handle), c.log, remoting.PeerOptions{MaxInFlight: o.maxInFlight})
	c.wg.Add(2)
	go c.routeLoop()
	go c.heartbeatLoop()
	return c, nil
}

// ID is the client id "<ip>@<instance>" sent in heartbeats.
func (c *Client) ID() string { return c.id }

// Logger is the client's logger.
func (c *Client) Logger() *slog.Logger { return c.log }

// NameServers lists the configured name servers.
func (c *Client) NameServers() []string { return append([]string(nil), c.opts.nameServers...) }

// RequestTimeout is the default timeout of small requests.
func (c *Client) RequestTimeout() time.Duration { return c.opts.requestTimeout }

// Done is closed when the client is closed.
func (c *Client) Done() <-chan struct{} { return c.ctx.Done() }

// Close stops the background loops and closes every connection. Producers
// and consumers using the client should be shut down first.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.cancel()
	c.wg.Wait()
	return c.rc.Close()
}

// NewRequest builds a request as the official Go client does: JSON header,
// language GO, version 317, a fresh opaque.
func NewRequest(code int32, ext map[string]string, body []byte) *remoting.Command {
	req := remoting.NewRequest(code, ext, body)
	req.Language = Language
	req.Version = Version
	return req
}

// dialAddr adds the name server's scheme to a plain broker address.
func (c *Client) dialAddr(addr string) string {
	if c.scheme == "tcp" || strings.Contains(addr, "://") {
		return addr
	}
	return c.scheme + "://" + addr
}

func (c *Client) sign(req *remoting.Command) {
	if c.opts.accessKey == "" || c.opts.secretKey == "" {
		return
	}
	if c.opts.strictSign {
		c.signStrict(req, time.Now()) // sign_strict.go
		return
	}
	delete(req.ExtFields, "Signature")
	req.ExtFields["AccessKey"] = c.opts.accessKey
	keys := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		if k == "SecurityToken" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(c.opts.secretKey))
	for _, k := range keys {
		mac.Write([]byte(req.ExtFields[k]))
	}
	if len(req.BodyParts) > 0 {
		for _, b := range req.BodyParts {
			mac.Write(b)
		}
	} else {
		mac.Write(req.Body)
	}
	req.ExtFields["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if c.opts.securityToken != "" {
		req.ExtFields["SecurityToken"] = c.opts.securityToken
	}
}

// withTimeout bounds ctx by d unless it has a deadline already; then it
// is used as it is (a derived context per call would cost an allocation
// and, on the transport, a cancellation registration per write).
func (c *Client) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Invoke sends req to addr (a broker or name server) and waits for the
// answer. The error is non-nil only when no answer arrived; check the
// response code. Without a deadline on ctx the request timeout applies.
func (c *Client) Invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	return c.InvokeDeadline(ctx, addr, req, time.Time{})
}

// InvokeDeadline is Invoke with the wait bounded by deadline (when not
// zero) instead of the request timeout, without a context per call: the
// connection's sweep fails the call with ErrTimeout once it passes.
func (c *Client) InvokeDeadline(ctx context.Context, addr string, req *remoting.Command, deadline time.Time) (*remoting.Command, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = c.withTimeout(ctx, c.opts.requestTimeout)
		defer cancel()
	}
	c.sign(req)
	da := c.dialAddr(addr)
	resp, err := c.rc.InvokeDeadline(ctx, da, req, deadline)
	if err != nil {
		// A timeout leaves the connection to the other requests on it (a
		// failed write already closed it, and the next call redials).
		return nil, wrapCallErr(addr, req.Code, err)
	}
	return resp, nil
}

// InvokeAsync sends req and calls cb with the answer from the
// connection's callback goroutine (see remoting.Peer.InvokeAsync). ctx
// bounds the wait. When it returns an error, cb is not called.
func (c *Client) InvokeAsync(ctx context.Context, addr string, req *remoting.Command, cb func(*remoting.Command, error)) error {
	return c.InvokeAsyncDeadline(ctx, addr, req, time.Time{}, cb)
}

// InvokeAsyncDeadline is InvokeAsync with the wait also bounded by
// deadline (when not zero), without a context per call: the connection's
// sweep fails the call with ErrTimeout once it passes.
func (c *Client) InvokeAsyncDeadline(ctx context.Context, addr string, req *remoting.Command, deadline time.Time, cb func(*remoting.Command, error)) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.sign(req)
	da := c.dialAddr(addr)
	code := req.Code
	err := c.rc.InvokeAsyncDeadline(ctx, da, req, deadline, func(resp *remoting.Command, err error) {
		if err != nil {
			err = wrapCallErr(addr, code, err)
		}
		cb(resp, err)
	})
	if err != nil {
		return wrapCallErr(addr, req.Code, err)
	}
	return nil
}

// SendOneway writes req without waiting for an answer. Like the official
// client it leaves the oneway flag clear; the broker's answer is dropped.
func (c *Client) SendOneway(ctx context.Context, addr string, req *remoting.Command) error {
	if c.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := c.withTimeout(ctx, c.opts.requestTimeout)
	defer cancel()
	c.sign(req)
	p, err := c.rc.Peer(ctx, c.dialAddr(addr))
	if err != nil {
		return wrapCallErr(addr, req.Code, err)
	}
	if err := p.Send(ctx, req); err != nil {
		return wrapCallErr(addr, req.Code, err)
	}
	return nil
}

// Reply sends resp (built for a broker's request) on peer p.
func (c *Client) Reply(ctx context.Context, p *remoting.Peer, resp *remoting.Command) error {
	resp.Language, resp.Version = Language, Version
	c.sign(resp)
	return p.Reply(ctx, resp)
}

// SendOnPeer signs and writes a request on an existing connection (used
// to answer transaction checks on the connection they came from).
func (c *Client) SendOnPeer(ctx context.Context, p *remoting.Peer, req *remoting.Command) error {
	c.sign(req)
	return p.Send(ctx, req)
}

// InvokeNameServer sends req to the name servers round-robin, moving to
// the next only on transport errors, as the official client does.
func (c *Client) InvokeNameServer(ctx context.Context, req func() *remoting.Command) (*remoting.Command, string, error) {
	ns := c.opts.nameServers
	start := int(c.nsNext.Add(1))
	var last error
	for i := range ns {
		addr := ns[(start+i)%len(ns)]
		cctx, cancel := c.withTimeout(ctx, c.opts.namesrvTimeout)
		resp, err := c.Invoke(cctx, addr, req())
		cancel()
		if err == nil {
			return resp, addr, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", last
}

// RegisterProducer adds a producer group to heartbeats and routes
// transaction checks of that group to h.
func (c *Client) RegisterProducer(group string, h ProducerHandler) error {
	c.memberMu.Lock()
	defer c.memberMu.Unlock()
	if _, dup := c.producers[group]; dup {
		return fmt.Errorf("client: producer group %q already registered on this client", group)
	}
	c.producers[group] = h
	return nil
}

// UnregisterProducer removes a producer group.
func (c *Client) UnregisterProducer(group string) {
	c.memberMu.Lock()
	delete(c.producers, group)
	c.memberMu.Unlock()
}

// RegisterConsumer adds a consumer group to heartbeats.
func (c *Client) RegisterConsumer(group string, h ConsumerHandler) error {
	c.memberMu.Lock()
	defer c.memberMu.Unlock()
	if _, dup := c.consumers[group]; dup {
		return fmt.Errorf("client: consumer group %q already registered on this client", group)
	}
	c.consumers[group] = h
	return nil
}

// UnregisterConsumer removes a consumer group and, like Java's client,
// sends UNREGISTER_CLIENT to the brokers so the group rebalances at once
// (the official Go client relies on the connection closing instead).
func (c *Client) UnregisterConsumer(ctx context.Context, group string) {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	c.memberMu.Lock()
	delete(c.consumers, group)
	c.memberMu.Unlock()
	// A heartbeat without the group updates the broker's table too, but
	// the broker keeps the channel until expiry; unregister explicitly.
	for _, addr := range c.brokerAddrs(false) {
		req := NewRequest(remoting.UnregisterClient, map[string]string{"clientID": c.id, "consumerGroup": group}, nil)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Invoke(cctx, addr, req)
		cancel()
		if err != nil {
			c.log.Debug("unregister client", "broker", addr, "err", err)
		}
	}
}

func (c *Client) consumer(group string) ConsumerHandler {
	c.memberMu.RLock()
	defer c.memberMu.RUnlock()
	return c.consumers[group]
}

// handle serves requests brokers send to the client.
func (c *Client) handle(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	switch req.Code {
	case remoting.CheckTransactionState:
		c.handleCheck(ctx, p, req)
		return nil
	case remoting.NotifyConsumerIDsChanged:
		if h := c.consumer(req.Ext("consumerGroup")); h != nil {
			c.log.Debug("consumer ids changed", "group", req.Ext("consumerGroup"))
			h.IDsChanged()
		}
		return nil
	case remoting.ResetConsumerClientOffset:
		group, topic := req.Ext("group"), req.Ext("topic")
		h := c.consumer(group)
		if h == nil {
			return nil
		}
		table, err := ParseOffsetTable(req.Body)
		if err != nil {
			c.log.Warn("bad reset-offset body", "group", group, "err", err)
			return nil
		}
		c.log.Info("broker resets consumer offsets", "group", group, "topic", topic, "queues", len(table))
		h.ResetOffset(topic, table)
		return nil
	case remoting.GetConsumerStatusFromClient:
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Language, resp.Version = Language, Version
		h := c.consumer(req.Ext("group"))
		if h == nil {
			resp.Code, resp.Remark = remoting.SystemError, "no such consumer group on this client"
			return resp
		}
		resp.Body = EncodeOffsetTable("messageQueueTable", h.Offsets(req.Ext("topic")))
		return resp
	case remoting.PushReplyMessageToClient:
		return c.handlePushReply(req) // reply.go
	case remoting.GetConsumerRunningInfo:
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Language, resp.Version = Language, Version
		h := c.consumer(req.Ext("consumerGroup"))
		if h == nil {
			resp.Code, resp.Remark = remoting.SystemError, "the consumer group not exist in this client"
			return resp
		}
		resp.Body = runningInfo(h)
		return resp
	}
	c.log.Debug("unsupported request from broker", "code", req.Code, "remote", p.RemoteAddr())
	return nil
}

func (c *Client) handleCheck(ctx context.Context, p *remoting.Peer, req *remoting.Command) {
	msgs, err := DecodeMessages(req.Body, "")
	if err != nil || len(msgs) == 0 {
		c.log.Warn("bad transaction check body", "err", err)
		return
	}
	group := msgs[0].Properties["PGROUP"]
	c.memberMu.RLock()
	h := c.producers[group]
	c.memberMu.RUnlock()
	if h == nil {
		c.log.Debug("transaction check for a group not on this client", "group", group)
		return
	}
	h.CheckTransaction(ctx, p, req)
}
