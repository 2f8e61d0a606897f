package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/config"
)

// DefaultDelayLevels is RocketMQ's messageDelayLevel table.
const DefaultDelayLevels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// Config is the schedule section.
type Config struct {
	// Enabled turns delayed and timer messages on. Off, a DELAY level or a
	// delivery time is ignored and the message is delivered at once.
	Enabled bool `koanf:"enabled"`
	// DelayLevels lists the delay of each level, space separated (level n
	// is the n-th entry; levels above the last clamp to it). Units: ms, s,
	// m, h, d or anything time.ParseDuration accepts.
	DelayLevels string `koanf:"delay_levels"`
	// MaxDelay bounds timer messages (__STARTDELIVERTIME, TIMER_DELIVER_MS,
	// TIMER_DELAY_MS): a later delivery time is refused with
	// MESSAGE_ILLEGAL. Default 40 days.
	MaxDelay time.Duration `koanf:"max_delay"`

	// wheelSlot overrides the wheel's slot span (tests).
	wheelSlot time.Duration
	// now overrides the service's clock (tests); it must be safe to call
	// from any goroutine.
	now func() time.Time
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{Enabled: true, DelayLevels: DefaultDelayLevels, MaxDelay: 40 * 24 * time.Hour}
}

// NewConfigFrom decodes the schedule section strictly and validates it.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode("schedule", c); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

// Validate reports every problem with its key.
func (c *Config) Validate() error {
	var errs config.Errors
	if _, err := ParseLevels(c.DelayLevels); err != nil {
		errs.Add("schedule.delay_levels", "%v", err)
	}
	if c.MaxDelay <= 0 {
		errs.Add("schedule.max_delay", "%s must be positive", c.MaxDelay)
	}
	return errs.Err()
}

// Levels returns the parsed delay levels (call after Validate).
func (c *Config) Levels() []time.Duration {
	l, _ := ParseLevels(c.DelayLevels)
	return l
}

// ParseLevels parses a space- or comma-separated list of positive
// durations; a "d" suffix means days.
func ParseLevels(s string) ([]time.Duration, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(f) == 0 {
		return nil, fmt.Errorf("no delay levels")
	}
	if len(f) > 64 {
		return nil, fmt.Errorf("%d delay levels, at most 64", len(f))
	}
	out := make([]time.Duration, 0, len(f))
	for i, e := range f {
		d, err := parseDuration(e)
		if err != nil {
			return nil, fmt.Errorf("level %d %q: %v", i+1, e, err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("level %d %q: must be positive", i+1, e)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("not a duration")
		}
		return time.Duration(v * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration")
	}
	return d, nil
}
