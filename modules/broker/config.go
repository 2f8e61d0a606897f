package broker

import (
	"net"
	"net/netip"
	"time"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/protocol"
)

// Config is the broker section.
type Config struct {
	// Listen is the address served on every enabled transport.
	Listen string `koanf:"listen" addr:"listen"`
	// Advertise is the address registered with name servers and used as the
	// store host in message ids; it must be an IP literal with a port.
	// Default: Listen.
	Advertise string `koanf:"advertise"`
	Name      string `koanf:"name"`
	Cluster   string `koanf:"cluster"`
	ID        int64  `koanf:"id"`
	// Role is ASYNC_MASTER, SYNC_MASTER or SLAVE (RocketMQ brokerRole); a
	// broker with id ≥ 1 must be SLAVE (modules/ha replicates).
	Role string `koanf:"role"`
	// Namesrv lists the name servers to register with.
	Namesrv []string `koanf:"namesrv" addr:"dial"`
	// Standalone says the broker runs without name servers on purpose
	// (tests, a single-node setup whose clients know its address): mq
	// broker refuses an empty Namesrv otherwise.
	Standalone bool `koanf:"standalone"`
	// AutoCreateTopic lets producers create topics by sending (TBW102).
	AutoCreateTopic bool `koanf:"auto_create_topic"`
	// DefaultTopicQueues is the queue count of TBW102 (the cap for
	// auto-created topics) and of topics created without a count.
	DefaultTopicQueues int `koanf:"default_topic_queues"`
	// RegisterInterval is the name-server registration period (10s–60s).
	RegisterInterval time.Duration `koanf:"register_interval"`
	// LongPolling holds pulls on empty queues until a message arrives.
	LongPolling bool `koanf:"long_polling"`
	// MaxSuspend caps how long a pull is held, whatever the client asks.
	MaxSuspend time.Duration `koanf:"max_suspend"`
	// ShortPolling is how long pulls are held with long polling off.
	ShortPolling time.Duration `koanf:"short_polling"`
	// ClientExpiry drops producer and consumer channels silent this long.
	ClientExpiry time.Duration `koanf:"client_expiry"`
	// ScanInterval is how often silent clients are looked for.
	ScanInterval time.Duration `koanf:"scan_interval"`
	// OffsetFlushInterval is how often consumer offsets are persisted.
	OffsetFlushInterval time.Duration `koanf:"offset_flush_interval"`
	// MaxMessageSize bounds one message body.
	MaxMessageSize config.ByteSize `koanf:"max_message_size"`
	// PullBatchMax bounds messages per pull (default 1024; RocketMQ's
	// maxTransferCountOnMessageInMemory is 32). Clients ask for what they
	// want (the official clients 32); PullBytesMax bounds the bytes.
	PullBatchMax int `koanf:"pull_batch_max"`
	// PullBytesMax bounds bytes per pull (RocketMQ: 256 KiB).
	PullBytesMax config.ByteSize `koanf:"pull_bytes_max"`
	// RebalanceLockMaxLiveTime is how long an orderly consumer's queue lock
	// lasts without renewal (Java rocketmq.broker.rebalance.lockMaxLiveTime).
	RebalanceLockMaxLiveTime time.Duration `koanf:"rebalance_lock_max_live_time"`
	// BusyTimeout sheds a send (SYSTEM_BUSY, [TIMEOUT_CLEAN_QUEUE]) that
	// waited this long for a slot (Java waitTimeMillsInSendQueue).
	BusyTimeout time.Duration `koanf:"busy_timeout"`
	// StoreBusyTimeout sheds a send (SYSTEM_BUSY, [PC_SYNCHRONIZED]) that
	// arrives while a store write has been stuck this long (Java
	// osPageCacheBusyTimeOutMills, 1 s): an fsync that stalls for a few
	// hundred milliseconds on a loaded disk is not yet overload.
	StoreBusyTimeout time.Duration `koanf:"store_busy_timeout"`
	// SendQueueCapacity bounds the sends held at once.
	SendQueueCapacity int `koanf:"send_queue_capacity"`
	// Quota holds optional per-topic and per-producer-group rate limits.
	Quota QuotaConfig `koanf:"quota"`
	// TraceTopicEnable creates the message-trace topic at start (Java
	// traceTopicEnable, default false); TraceTopicName names it (Java
	// msgTraceTopicName, default RMQ_SYS_TRACE_TOPIC). trace.go.
	TraceTopicEnable bool   `koanf:"trace_topic_enable"`
	TraceTopicName   string `koanf:"trace_topic_name"`
	// ValidateSystemTopicWhenUpdateTopic refuses system topics in
	// UPDATE_AND_CREATE_TOPIC (Java's key of the same name, default true).
	ValidateSystemTopicWhenUpdateTopic bool `koanf:"validate_system_topic_when_update_topic"`
	// DeliverRecordCRC delivers stored records with the checksum property
	// the engine ends them with (store.PropertyRecordCRC, __CRC32#), as
	// Java does with enabledAppendPropCRC; by default (Java's) clients
	// never see it. recordcrc.go.
	DeliverRecordCRC bool `koanf:"deliver_record_crc"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{
		Listen: "127.0.0.1:10911", Name: "broker-a", Cluster: protocol.DefaultCluster, Role: RoleAsyncMaster,
		AutoCreateTopic: true, DefaultTopicQueues: 8, RegisterInterval: 30 * time.Second,
		LongPolling: true, MaxSuspend: 20 * time.Second, ShortPolling: time.Second,
		ClientExpiry: 120 * time.Second, ScanInterval: 10 * time.Second,
		OffsetFlushInterval: 5 * time.Second, MaxMessageSize: 4 << 20,
		PullBatchMax: 1024, PullBytesMax: 256 << 10, RebalanceLockMaxLiveTime: 60 * time.Second,
		BusyTimeout: 200 * time.Millisecond, StoreBusyTimeout: time.Second, SendQueueCapacity: 10000,
		TraceTopicName: protocol.TraceTopic, ValidateSystemTopicWhenUpdateTopic: true,
	}
}

// Validate reports every problem with its key.
func (c *Config) Validate() error {
	var errs config.Errors
	if c.Listen == "" {
		errs.Add("broker.listen", "must be set")
	}
	// broker.listen's and broker.namesrv's form: their addr tags
	// (config.Decode).
	adv := c.AdvertiseAddr()
	if _, _, err := net.SplitHostPort(c.Listen); c.Advertise == "" && err != nil {
		// broker.listen is at fault, and said so above.
	} else if _, err := netip.ParseAddrPort(adv); err != nil {
		errs.Add("broker.advertise", "%q is not an ip:port (RocketMQ clients need an IP literal): %v", adv, err)
	}
	if c.Name == "" {
		errs.Add("broker.name", "must be set")
	}
	if c.Cluster == "" {
		errs.Add("broker.cluster", "must be set")
	}
	if c.ID < 0 {
		errs.Add("broker.id", "must be 0 (master) or more")
	}
	switch {
	case c.Role != RoleAsyncMaster && c.Role != RoleSyncMaster && c.Role != RoleSlave:
		errs.Add("broker.role", "%q is none of ASYNC_MASTER, SYNC_MASTER, SLAVE", c.Role)
	case c.ID >= 1 && c.Role != RoleSlave:
		errs.Add("broker.role", "broker.id %d is a slave's id: the role must be SLAVE, not %s", c.ID, c.Role)
	case c.ID == 0 && c.Role == RoleSlave:
		errs.Add("broker.role", "a SLAVE needs broker.id 1 or more (0 is the master)")
	}
	if c.DefaultTopicQueues < 1 || c.DefaultTopicQueues > 1024 {
		errs.Add("broker.default_topic_queues", "%d is outside 1..1024", c.DefaultTopicQueues)
	}
	if c.RegisterInterval < time.Second || c.RegisterInterval > time.Minute {
		errs.Add("broker.register_interval", "%s is outside 1s..60s", c.RegisterInterval)
	}
	if c.MaxSuspend <= 0 || c.MaxSuspend > 25*time.Second {
		errs.Add("broker.max_suspend", "%s is outside (0, 25s] (clients time out pulls at 30s)", c.MaxSuspend)
	}
	if c.ClientExpiry <= 0 || c.ScanInterval <= 0 || c.OffsetFlushInterval <= 0 || c.ShortPolling <= 0 {
		errs.Add("broker", "client_expiry, scan_interval, short_polling and offset_flush_interval must be positive")
	}
	if c.MaxMessageSize < 1 || c.MaxMessageSize > 64<<20 {
		errs.Add("broker.max_message_size", "%d is outside 1..64MiB", c.MaxMessageSize)
	}
	if c.RebalanceLockMaxLiveTime <= 0 {
		errs.Add("broker.rebalance_lock_max_live_time", "must be positive, got %s", c.RebalanceLockMaxLiveTime)
	}
	if c.PullBatchMax < 1 || c.PullBytesMax < 1024 {
		errs.Add("broker.pull_batch_max", "pull limits too small")
	}
	if c.BusyTimeout <= 0 {
		errs.Add("broker.busy_timeout", "must be positive")
	}
	if c.StoreBusyTimeout <= 0 {
		errs.Add("broker.store_busy_timeout", "must be positive")
	}
	if c.SendQueueCapacity < 1 {
		errs.Add("broker.send_queue_capacity", "must be at least 1")
	}
	if err := protocol.ValidateTopic(c.TraceTopicName); c.TraceTopicEnable && err != nil {
		errs.Add("broker.trace_topic_name", "%v", err)
	}
	for name, l := range c.Quota.Topics {
		if l.MessagesPerSec < 0 || l.BytesPerSec < 0 {
			errs.Add("broker.quota.topics."+name, "limits must not be negative")
		}
	}
	for name, l := range c.Quota.Groups {
		if l.MessagesPerSec < 0 || l.BytesPerSec < 0 {
			errs.Add("broker.quota.groups."+name, "limits must not be negative")
		}
	}
	return errs.Err()
}

// AdvertiseAddr is the registered address.
func (c *Config) AdvertiseAddr() string {
	if c.Advertise != "" {
		return c.Advertise
	}
	return c.Listen
}
