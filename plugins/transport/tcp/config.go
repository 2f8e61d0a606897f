package tcp

import (
	"fmt"
	"time"
)

// Config is the transport.tcp section.
type Config struct {
	// IdleTimeout closes a connection that received nothing for this long
	// (RocketMQ closes idle channels after 120 s). 0 disables it.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// DialTimeout bounds connection set-up.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// WriteTimeout bounds one frame write; a peer that stops reading is
	// dropped instead of blocking its writers forever.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// ReadBuffer and WriteBuffer size the per-connection buffers.
	ReadBuffer  int `koanf:"read_buffer"`
	WriteBuffer int `koanf:"write_buffer"`
	// NoDelay sets TCP_NODELAY.
	NoDelay bool `koanf:"no_delay"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{IdleTimeout: 120 * time.Second, DialTimeout: 15 * time.Second, WriteTimeout: 30 * time.Second,
		ReadBuffer: 64 << 10, WriteBuffer: 64 << 10, NoDelay: true}
}

// Validate checks the values.
func (c *Config) Validate() error {
	if c.IdleTimeout < 0 || c.DialTimeout < 0 || c.WriteTimeout < 0 {
		return fmt.Errorf("timeouts must not be negative")
	}
	if c.ReadBuffer < 512 || c.WriteBuffer < 512 {
		return fmt.Errorf("read_buffer and write_buffer must be at least 512 bytes")
	}
	return nil
}
