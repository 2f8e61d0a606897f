package transaction

import (
	"time"

	"github.com/quivermq/quiver/core/config"
)

// Section is the configuration section this module owns.
const Section = "transaction"

// Config is the transaction section.
type Config struct {
	// Enabled turns transactional messages on. When off, a transactional
	// (prepared) send is refused instead of being stored as a plain
	// message. Default true.
	Enabled bool `koanf:"enabled"`
	// Timeout is how old an undecided half message must be before its
	// producer group is asked about it (Java transactionTimeOut). A message
	// property CHECK_IMMUNITY_TIME_IN_SECONDS overrides it per message.
	// Default 6s.
	Timeout time.Duration `koanf:"timeout"`
	// CheckInterval is how often undecided half messages are checked back
	// (Java transactionCheckInterval). Default 60s.
	CheckInterval time.Duration `koanf:"check_interval"`
	// CheckMax is how many check-backs a half message gets before it is
	// discarded to TRANS_CHECK_MAX_TIME_TOPIC (Java transactionCheckMax).
	// Default 15.
	CheckMax int `koanf:"check_max"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{Enabled: true, Timeout: 6 * time.Second, CheckInterval: 60 * time.Second, CheckMax: 15}
}

// Validate reports every bad value with its key path.
func (c *Config) Validate() error {
	var errs config.Errors
	if c.Timeout <= 0 {
		errs.Add(Section+".timeout", "must be positive, got %s", c.Timeout)
	}
	if c.CheckInterval <= 0 {
		errs.Add(Section+".check_interval", "must be positive, got %s", c.CheckInterval)
	}
	if c.CheckMax < 1 {
		errs.Add(Section+".check_max", "must be at least 1, got %d", c.CheckMax)
	}
	return errs.Err()
}

// NewConfigFrom decodes the transaction section of cfg strictly over the
// defaults and validates it.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode(Section, c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
