package ha

import (
	"time"

	"github.com/quivermq/quiver/core/config"
)

// Config is the ha section.
type Config struct {
	// MasterAddr is the master's address for a slave (its HA requests go
	// to the master's broker port). Default: looked up in the name
	// servers (GET_BROKER_CLUSTER_INFO: brokerAddrs[0] of broker.name).
	MasterAddr string `koanf:"master_addr"`
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
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{
		SyncTimeout: 3 * time.Second, SlaveFallBehindMax: 256 << 20, SlaveReadLagBytes: 1 << 30,
		BatchBytes: 1 << 20, MaxWait: time.Second, MetaInterval: 10 * time.Second, LagLogInterval: 10 * time.Second,
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
	return errs.Err()
}

// NewConfigFrom decodes the ha section strictly.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode("ha", c); err != nil {
		return nil, err
	}
	return c, c.Validate()
}
