package tag

// Config is the filter.tag section. The TAG filter has no settings; the
// type exists so the plugin has the same shape as every other one and can
// grow options without changing its Provider.
type Config struct{}

// NewConfig returns the defaults.
func NewConfig() *Config { return &Config{} }

// Validate checks the values.
func (c *Config) Validate() error { return nil }
