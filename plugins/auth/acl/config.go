package acl

import (
	"errors"
	"fmt"
	"time"
)

// DefaultReloadInterval is how often the ACL file is checked for changes.
const DefaultReloadInterval = 2 * time.Second

// Config is the plugin's section (auth.acl.* in the broker and name
// server configuration; the old spelling acl.* is read as auth.acl.*).
//
// Whether the plugin runs at all is not decided here: the kernel's keys
// auth.acl.enabled and auth.acl.namesrv_enabled decide whether the guard
// opens it; when it does, this section configures it.
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
	// StrictSignatures is the signature mode (see sign.go):
	//   - accept (default): ACL 1.0 signatures (official clients) and
	//     Quiver's strict signatures, which also cover the request code, a
	//     timestamp and a nonce, are both accepted; a request that carries
	//     a strict signature is held to it. This process signs its own
	//     requests strictly.
	//   - require: only strict signatures are accepted (white-listed
	//     addresses aside); official RocketMQ clients are refused.
	//   - off: as accept, but this process signs its own requests with
	//     ACL 1.0 (for peers that know only 1.0).
	StrictSignatures string `koanf:"strict_signatures"`
	// SignatureWindow is how far a strict signature's timestamp may be
	// from this server's clock, either way. Nonces are remembered for
	// twice as long, so a request cannot be replayed. Default 1m.
	SignatureWindow time.Duration `koanf:"signature_window"`
	// NonceCacheSize bounds the nonces remembered per generation (two
	// windows); when it is full, strict requests are refused until the
	// generation turns (fail closed). It caps strict requests at
	// NonceCacheSize / (2 × SignatureWindow) a second per server (the
	// defaults: about 17 000/s, some 80 MB at most). Default 2097152.
	NonceCacheSize int `koanf:"nonce_cache_size"`
	// StrictWhiteList makes a white-listed address (global or an
	// account's) still need a valid signature of an account with the
	// permissions for admin-only codes and the ACL admin codes. Off by
	// default: RocketMQ 4.9 lets a white-listed address skip every check.
	StrictWhiteList bool `koanf:"strict_white_list"`
}

// Signature modes (Config.StrictSignatures).
const (
	SignAccept  = "accept"
	SignRequire = "require"
	SignOff     = "off"
)

// Defaults.
const (
	DefaultSignatureWindow = time.Minute
	DefaultNonceCacheSize  = 2 << 20
)

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{ReloadInterval: DefaultReloadInterval, StrictSignatures: SignAccept,
		SignatureWindow: DefaultSignatureWindow, NonceCacheSize: DefaultNonceCacheSize}
}

// Validate checks the values and fills zero ones with their defaults.
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
	switch c.StrictSignatures {
	case SignAccept, SignRequire, SignOff:
	case "":
		c.StrictSignatures = SignAccept
	default:
		errs = append(errs, fmt.Errorf("strict_signatures: %q is none of accept, require, off", c.StrictSignatures))
	}
	switch {
	case c.SignatureWindow == 0:
		c.SignatureWindow = DefaultSignatureWindow
	case c.SignatureWindow < 0:
		errs = append(errs, fmt.Errorf("signature_window: %v is negative", c.SignatureWindow))
	}
	switch {
	case c.NonceCacheSize == 0:
		c.NonceCacheSize = DefaultNonceCacheSize
	case c.NonceCacheSize < 0:
		errs = append(errs, fmt.Errorf("nonce_cache_size: %d is negative", c.NonceCacheSize))
	}
	return errors.Join(errs...)
}
