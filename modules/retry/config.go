package retry

import "github.com/quivermq/quiver/core/config"

// Config is the retry section.
type Config struct {
	// Enabled lets the broker take consumers' failed messages back
	// (CONSUMER_SEND_MSG_BACK). Off, send-back is refused and clients fall
	// back to sending the message to %RETRY%<group> themselves; DLQ resend
	// and offset reset stay available.
	Enabled bool `koanf:"enabled"`
}

// NewConfig returns the defaults.
func NewConfig() *Config { return &Config{Enabled: true} }

// NewConfigFrom decodes the retry section strictly and validates it.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode("retry", c); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

// Validate reports every problem with its key.
func (c *Config) Validate() error { return nil }
