package metrics

import (
	"fmt"
	"net"

	"github.com/quivermq/quiver/core/config"
)

// DevListen is where `mq dev` serves metrics when metrics.listen is unset.
const DevListen = "127.0.0.1:9090"

// Config is the metrics section.
type Config struct {
	// Listen is the host:port serving /metrics, /healthz and /readyz.
	// Empty (the default) serves nothing; `mq dev` uses DevListen.
	Listen string `koanf:"listen" addr:"listen"`
	// RocketMQExporterCompat also serves, on a broker, the rocketmq_*
	// series Apache rocketmq-exporter exposes (same names, labels and
	// units), so its Grafana dashboard and alert rules work against the
	// broker directly (rocketmq_compat.go). On by default.
	RocketMQExporterCompat bool `koanf:"rocketmq_exporter_compat"`
}

// NewConfig returns the defaults: metrics off; the rocketmq-exporter
// compatible series on once they are served.
func NewConfig() *Config { return &Config{RocketMQExporterCompat: true} }

// Validate checks Listen is host:port.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("config: metrics.listen: %w", err)
	}
	return nil
}

// NewConfigFrom decodes the metrics section strictly.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode("metrics", c); err != nil {
		return nil, err
	}
	return c, c.Validate()
}
