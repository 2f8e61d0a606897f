// Package broker is the broker module: it serves RocketMQ's send, pull,
// offset, heartbeat and admin requests on top of a store.Store, registers
// with name servers, and holds pulls on empty queues (long polling).
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/e2etrace"
)

// Deps are the broker's collaborators.
type Deps struct {
	Store      store.Store
	Transports *transport.Set
	// Filters maps expression types (TAG, SQL92, ...) to their compilers.
	Filters map[string]filter.Compiler
	Logger  *slog.Logger
	// DataDir holds metadata files when the store keeps none itself.
	DataDir string
	// Retention is storage.retention: DELETE_EXPIRED_COMMITLOG deletes
	// what is older at once (0 keeps everything).
	Retention time.Duration
	// PeerOptions tune each connection.
	PeerOptions remoting.PeerOptions
	// MaxConns and MaxConnsPerHost bound connections (0 = unbounded).
	MaxConns, MaxConnsPerHost int
	// Interceptors run before every processor (authentication, ACL).
	Interceptors []remoting.Interceptor
	// Sign, when set, signs the broker's own requests to name servers.
	Sign func(*remoting.Command)
	// Authenticators are the enabled auth plugins; the ACL admin codes
	// look among them for an auth.AccountAdmin (acl_admin.go).
	Authenticators []auth.Authenticator
	// StoreFlush is storage.flush; with async (and no synchronous
	// replica) sends are served on the connection's reader (send.go,
	// sendsInline). Empty: not known, sends go to worker goroutines.
	StoreFlush store.FlushMode
	// Cleaner, when set, is storage's retention loop: UPDATE_BROKER_CONFIG
	// changes its fileReservedTime and deleteWhen (admin_config.go).
	Cleaner RetentionSchedule
}

// RetentionSchedule is the retention loop's run-time settings
// (retention.Cleaner).
type RetentionSchedule interface {
	Schedule() (time.Duration, []int)
	SetSchedule(retention time.Duration, cleanAt []int)
}

// Broker is one broker process.
type Broker struct {
	claim     atomic.Pointer[GroupClaim]    // groupclaim.go
	sendExt   atomic.Pointer[SendAnswerExt] // sendext.go
	cfg       *Config
	deps      Deps
	log       *slog.Logger
	store     store.Store
	storeHost netip.AddrPort

	router  *remoting.Router
	server  *remoting.Server
	nsrv    *remoting.Client
	topics  *topicTable
	offsets *offsetTable
	groups  *groupTable
	clients *clientTable
	holds   *holdTable
	filters *filterCache
	obs     observer     // running figures and pull hooks (observe.go)
	replica replicaHooks // set by the replication module (replica.go)

	hooksMu         sync.RWMutex
	putHooks        []PutHook
	storedListeners []StoredListener

	tagsCode func(string) int64
	gate     *sendGate

	rt          runtimeConfig // UPDATE_BROKER_CONFIG changes (admin_config.go)
	stats       *brokerStats  // VIEW_BROKER_STATS_DATA (admin_stats.go)
	registerNow chan struct{}
	regs        registrations // regstate.go
	treg        topicRegs     // register_topic.go
	regBusy     sync.Map      // name server → a registration in flight (register.go)
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	started     bool
}

// New builds a broker; Start serves it.
func New(cfg *Config, deps Deps) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil || deps.Transports == nil {
		return nil, errors.New("broker: a store and transports are required")
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "broker", "broker", cfg.Name)
	host, err := netip.ParseAddrPort(cfg.AdvertiseAddr())
	if err != nil {
		return nil, fmt.Errorf("broker: advertise address: %w", err)
	}
	meta := newMetaStore(deps.Store, deps.DataDir)
	// Topic and subscription-group changes are journaled (journal.go)
	// under <dataDir>/config, whichever engine keeps the documents.
	journalDir := ""
	if deps.DataDir != "" {
		journalDir = filepath.Join(deps.DataDir, "config")
	}
	topics, err := newTopicTable(meta, journalDir, log)
	if err != nil {
		return nil, err
	}
	offsets, err := newOffsetTable(meta)
	if err != nil {
		topics.close()
		return nil, err
	}
	groups, err := newGroupTable(meta, journalDir, log)
	if err != nil {
		topics.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg: cfg, deps: deps, log: log, store: deps.Store, storeHost: host,
		router: remoting.NewRouter(), topics: topics, offsets: offsets, groups: groups,
		clients: newClientTable(), filters: newFilterCache(deps.Filters),
		registerNow: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
	}
	b.treg.init()
	b.gate = newSendGate(cfg.SendQueueCapacity, cfg.BusyTimeout, cfg.StoreBusyTimeout, newQuotas(cfg.Quota))
	b.tagsCode = message.TagsCode
	if tc, ok := deps.Filters[filter.TypeTag].(filter.TagsCoder); ok {
		b.tagsCode = tc.TagsCode
	}
	b.holds = newHoldTable(b)
	b.nsrv = remoting.NewClient(deps.Transports.Dial, nil, log, remoting.PeerOptions{})
	if err := b.initSystemTopics(); err != nil {
		return nil, err
	}
	for _, ic := range deps.Interceptors {
		b.router.Use(ic)
	}
	b.registerProcessors()
	b.registerReply()                       // reply.go
	b.AddReplicaMeta(b.groupsReplicaMeta()) // groupsreplica.go
	return b, nil
}

// Router exposes the request router so other modules (schedule, retry,
// transactions) can add processors and interceptors.
func (b *Broker) Router() *remoting.Router { return b.router }

// Store returns the broker's store.
func (b *Broker) Store() store.Store { return b.store }

// Config returns the configuration in force (a snapshot: UPDATE_BROKER_CONFIG
// replaces it, never changes it in place).
func (b *Broker) Config() *Config { return b.current() }

// Logger returns the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

func (b *Broker) initSystemTopics() error {
	sys := []*protocol.TopicConfig{
		{TopicName: protocol.SelfTestTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite},
		{TopicName: b.cfg.Cluster, ReadQueueNums: 16, WriteQueueNums: 16, Perm: protocol.PermInherit | protocol.PermRead | protocol.PermWrite},
		{TopicName: b.cfg.Name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermInherit | protocol.PermRead | protocol.PermWrite},
		{TopicName: protocol.OffsetMovedEvent, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite},
		// Request-reply's topic, as Java's TopicConfigManager (reply.go).
		{TopicName: ReplyTopic(b.cfg.Cluster), ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite},
	}
	if tc := b.traceTopicConfig(); tc != nil {
		sys = append(sys, tc)
	}
	if b.cfg.AutoCreateTopic {
		n := int32(b.cfg.DefaultTopicQueues)
		sys = append(sys, &protocol.TopicConfig{TopicName: protocol.AutoCreateTopic, ReadQueueNums: n, WriteQueueNums: n, Perm: protocol.PermInherit | protocol.PermRead | protocol.PermWrite})
	} else if _, err := b.topics.remove(protocol.AutoCreateTopic); err != nil {
		return err
	}
	for _, c := range sys {
		c.TopicFilterType = "SINGLE_TAG"
		if _, _, err := b.topics.putIfAbsent(c); err != nil {
			return err
		}
	}
	return nil
}

// Start binds every enabled transport synchronously, then serves and
// starts the background loops (registration, client expiry, offset flush,
// long-poll deadlines).
func (b *Broker) Start(ctx context.Context) error {
	lns, err := b.deps.Transports.Listen(ctx, b.cfg.Listen)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	b.server = remoting.NewServer(b.router, b.log, remoting.ServerOptions{
		Peer:         b.deps.PeerOptions,
		OnDisconnect: b.onDisconnect,
		MaxConns:     b.deps.MaxConns, MaxConnsPerHost: b.deps.MaxConnsPerHost,
	})
	for _, ln := range lns {
		b.server.Serve(ln)
		b.log.Info("broker listening", "addr", ln.Addr())
	}
	b.started = true
	e2etrace.Start(b.log) // a tracing build only: internal/e2etrace
	b.loop(b.cfg.ScanInterval, func() { b.notifyChanged(b.ctx, b.clients.expire(b.current().ClientExpiry)) })
	b.loop(b.cfg.OffsetFlushInterval, func() {
		if err := b.offsets.flush(); err != nil {
			b.log.Error("persist consumer offsets", "err", err)
		}
	})
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.holds.run(b.ctx)
	}()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.registerLoop(b.ctx)
	}()
	return nil
}

// Addrs lists the bound addresses.
func (b *Broker) Addrs() []string {
	if b.server == nil {
		return nil
	}
	return b.server.Addrs()
}

func (b *Broker) loop(every time.Duration, f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-b.ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// Stop unregisters from name servers, closes connections, stops the loops
// and persists offsets. The store is closed by its owner.
func (b *Broker) Stop(ctx context.Context) error {
	var errs []error
	if b.started {
		b.unregisterAll(ctx)
	}
	b.cancel()
	if b.server != nil {
		// In-flight requests get half of what is left of the stop
		// deadline: a request that outlives it is abandoned (it fails on
		// the closed store) so that the offsets flush here and the
		// store's close after the broker still run in time (fx skips the
		// remaining stop hooks once the deadline has passed).
		sctx := ctx
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			sctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
			defer cancel()
		}
		if err := b.server.Close(sctx); err != nil {
			errs = append(errs, fmt.Errorf("broker: requests still running at stop: %w", err))
		}
	}
	b.nsrv.Close()
	b.wg.Wait()
	e2etrace.Stop() // the last window's dump, in a tracing build
	if err := b.offsets.flush(); err != nil {
		errs = append(errs, err)
	}
	if err := b.topics.close(); err != nil {
		errs = append(errs, err)
	}
	if err := b.groups.close(); err != nil {
		errs = append(errs, err)
	}
	if f, ok := b.store.(store.Flusher); ok {
		if err := f.Flush(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (b *Broker) onDisconnect(p *remoting.Peer) {
	b.holds.dropPeer(p)
	if changed := b.clients.dropPeer(p); len(changed) > 0 {
		b.notifyChanged(b.ctx, changed)
	}
}

// triggerRegister asks the registration loop to register now.
func (b *Broker) triggerRegister() {
	select {
	case b.registerNow <- struct{}{}:
	default:
	}
}
