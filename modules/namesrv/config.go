package namesrv

import (
	"errors"
	"time"

	"github.com/quivermq/quiver/core/config"
)

// Section is the configuration section this module owns.
const Section = "namesrv"

// Config is the namesrv section.
type Config struct {
	// Listen is the address bound on every enabled transport. Default
	// "127.0.0.1:9876" (RocketMQ's name server port).
	Listen string `koanf:"listen" addr:"listen"`
	// ScanInterval is how often brokers are checked for expiry. Default 10s.
	ScanInterval time.Duration `koanf:"scan_interval"`
	// BrokerTimeout drops a broker that has not registered for this long.
	// Default 120s.
	BrokerTimeout time.Duration `koanf:"broker_timeout"`
	// KVConfigPath is the file that keeps the KV config (PUT_KV_CONFIG and
	// friends) across restarts, Java's kvConfig.json. Empty keeps it in
	// memory only. Default "./namesrv/kvConfig.json".
	KVConfigPath string `koanf:"kv_config_path"`
	// OrderMessageEnable puts a topic's ORDER_TOPIC_CONFIG entry into its
	// route as orderTopicConf (Java orderMessageEnable). Default false, as
	// Java. It can change at run time (UPDATE_NAMESRV_CONFIG).
	OrderMessageEnable bool `koanf:"order_message_enable"`
	// Controller is the automatic-failover controller run in this name
	// server (off by default).
	Controller ControllerConfig `koanf:"controller"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{Listen: "127.0.0.1:9876", ScanInterval: 10 * time.Second, BrokerTimeout: 120 * time.Second,
		KVConfigPath: "./namesrv/kvConfig.json", Controller: NewControllerConfig()}
}

// Validate reports every bad value with its key path.
func (c *Config) Validate() error {
	var errs config.Errors
	if c.Listen == "" {
		errs.Add(Section+".listen", "must not be empty")
	}
	// namesrv.listen's form: its addr tag (config.Decode).
	if c.ScanInterval <= 0 {
		errs.Add(Section+".scan_interval", "must be positive, got %s", c.ScanInterval)
	}
	if c.BrokerTimeout <= 0 {
		errs.Add(Section+".broker_timeout", "must be positive, got %s", c.BrokerTimeout)
	}
	if err := c.Controller.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errs.Err()
}

// NewConfigFrom decodes the namesrv section of cfg strictly over the
// defaults and validates it.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	var bad *config.AddrErrors
	err := cfg.Decode(Section, c)
	if err != nil && !errors.As(err, &bad) {
		return nil, err
	}
	// Bad addresses leave the rest decoded: report them with the rest.
	if err := errors.Join(err, c.Validate()); err != nil {
		return nil, err
	}
	return c, nil
}
