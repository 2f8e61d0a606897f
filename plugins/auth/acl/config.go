package acl

import (
	"errors"
	"fmt"
	"time"
)

// DefaultReloadInterval is how often the ACL file is checked for changes.
const DefaultReloadInterval = 2 * time.Second

// Config is the plugin's section (acl.* in the broker and name server
// configuration).
//
// Whether the plugin runs at all is not decided here: the broker or name
// server section (acl.enabled) decides whether the plugin is composed into
// the process; when it is, this section configures it.
type Config struct {
	// File is the path of the ACL file, YAML in RocketMQ's plain_acl.yml
	// layout (globalWhiteRemoteAddresses, accounts). Required.
	File string `koanf:"file"`
	// ReloadInterval is how often the file is polled for changes (mtime,
	// size, then a content hash). A changed file that does not load keeps
	// the last good rules and is logged at Error. 0 disables polling
	// (Reload can still be called). Default 2s.
	ReloadInterval time.Duration `koanf:"reload_interval"`
	// AccessKey and SecretKey are the credentials this process signs its
	// own requests with (a broker registering with a name server that
	// checks signatures). Empty: requests go unsigned.
	AccessKey string `koanf:"access_key"`
	SecretKey string `koanf:"secret_key"`
}

// NewConfig returns the defaults.
func NewConfig() *Config { return &Config{ReloadInterval: DefaultReloadInterval} }

// Validate checks the values.
func (c *Config) Validate() error {
	var errs []error
	if c.File == "" {
		errs = append(errs, errors.New("file: the ACL file path is required"))
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		errs = append(errs, errors.New("access_key and secret_key go together"))
	}
	if c.ReloadInterval < 0 {
		errs = append(errs, fmt.Errorf("reload_interval: %v is negative (0 disables reloading)", c.ReloadInterval))
	}
	return errors.Join(errs...)
}
