package ha

import (
	"errors"
	"time"

	"github.com/quivermq/quiver/core/config"
)

// Config is the ha section.
type Config struct {
	// MasterAddr is the master's address for a slave (its HA requests go
	// to the master's broker port). Default: looked up in the name
	// servers (GET_BROKER_CLUSTER_INFO: brokerAddrs[0] of broker.name).
	MasterAddr string `koanf:"master_addr" addr:"dial"`
	// SyncTimeout is how long a SYNC_MASTER send waits for a slave to
	// confirm its bytes before answering FLUSH_SLAVE_TIMEOUT (RocketMQ
	// syncFlushTimeout).
	SyncTimeout time.Duration `koanf:"sync_timeout"`
	// SlaveFallBehindMax: a SYNC_MASTER answers SLAVE_NOT_AVAILABLE at
	// once when no slave is within this many bytes (RocketMQ
	// haSlaveFallbehindMax, 256 MiB).
	SlaveFallBehindMax config.ByteSize `koanf:"slave_fall_behind_max"`
	// SlaveReadLagBytes: a master suggests pulling from the slave (id 1)
	// when a consumer's next message is more than this many bytes behind
	// the end of the commit log (RocketMQ: 40% of RAM). 0 never suggests.
	SlaveReadLagBytes config.ByteSize `koanf:"slave_read_lag_bytes"`
	// BatchBytes bounds one replication answer.
	BatchBytes config.ByteSize `koanf:"batch_bytes"`
	// MaxWait is how long the master holds a slave's request when it has
	// nothing new.
	MaxWait time.Duration `koanf:"max_wait"`
	// MetaInterval is how often a slave copies the master's topic config
	// and consumer offsets (RocketMQ SlaveSynchronize: 10 s).
	MetaInterval time.Duration `koanf:"meta_interval"`
	// LagLogInterval is how often a slave logs its replication lag.
	LagLogInterval time.Duration `koanf:"lag_log_interval"`
	// Failover puts the broker under automatic failover: the controllers
	// in the name servers (controller.enabled) decide who is master of
	// broker.name; broker.role and broker.id are the initial role and the
	// member's identity. Needs the commitlog engine.
	Failover bool `koanf:"failover"`
	// FailoverTimeout: the master's heartbeats lapsing this long elect an
	// in-sync slave; a master fences itself FailoverTimeout less
	// HeartbeatInterval after it sent the last heartbeat a controller
	// leader answered (its lease), before any election.
	FailoverTimeout time.Duration `koanf:"failover_timeout"`
	// HeartbeatInterval is how often a failover broker reports to the
	// controllers.
	HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	// SlaveID is the brokerId registered while serving as a slave under
	// failover. Default (0): broker.id, or 100 for broker.id 0.
	SlaveID int64 `koanf:"slave_id"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{
		SyncTimeout: 3 * time.Second, SlaveFallBehindMax: 256 << 20, SlaveReadLagBytes: 1 << 30,
		BatchBytes: 1 << 20, MaxWait: time.Second, MetaInterval: 10 * time.Second, LagLogInterval: 10 * time.Second,
		FailoverTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
	}
}

// Validate reports every problem with its key.
func (c *Config) Validate() error {
	var errs config.Errors
	if c.SyncTimeout <= 0 {
		errs.Add("ha.sync_timeout", "must be positive")
	}
	if c.SlaveFallBehindMax < 0 || c.SlaveReadLagBytes < 0 {
		errs.Add("ha", "slave_fall_behind_max and slave_read_lag_bytes must not be negative")
	}
	if c.BatchBytes < 4<<10 || c.BatchBytes > 64<<20 {
		errs.Add("ha.batch_bytes", "%d is outside 4KiB..64MiB", c.BatchBytes)
	}
	if c.MaxWait <= 0 || c.MaxWait > 10*time.Second {
		errs.Add("ha.max_wait", "%s is outside (0, 10s]", c.MaxWait)
	}
	if c.MetaInterval <= 0 || c.LagLogInterval <= 0 {
		errs.Add("ha", "meta_interval and lag_log_interval must be positive")
	}
	if c.FailoverTimeout < 500*time.Millisecond || c.FailoverTimeout > 5*time.Minute {
		errs.Add("ha.failover_timeout", "%s is outside 500ms..5m", c.FailoverTimeout)
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval*2 > c.FailoverTimeout {
		errs.Add("ha.heartbeat_interval", "%s must be positive and at most half of ha.failover_timeout", c.HeartbeatInterval)
	}
	if c.SlaveID < 0 {
		errs.Add("ha.slave_id", "must not be negative")
	}
	return errs.Err()
}

// NewConfigFrom decodes the ha section strictly.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	var bad *config.AddrErrors
	err := cfg.Decode("ha", c)
	if err != nil && !errors.As(err, &bad) {
		return nil, err
	}
	// A bad ha.master_addr leaves the rest decoded: report it with the rest.
	return c, errors.Join(err, c.Validate())
}
