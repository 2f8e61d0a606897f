// Package tokenauth is an auth plugin written against the declared
// interfaces of core/auth only: an auth.Authenticator and an
// auth.Authorizer, nothing optional. Each account is an access key with a
// static token, sent by clients in the extFields AccessKey and
// SecurityToken (what the official clients send from their Credentials),
// and a list of the topics it may use; admin accounts may do everything.
//
// The kernel's guard does the rest: it calls Authenticate on every
// request and Authorize for what the request code needs (publish on a
// send's topic, subscribe on a pull's topic and group, admin for the
// administrative codes; see package core/auth).
//
// A static token travels in clear text: use it over TLS, or take it as
// the starting point of a plugin that checks a signature.
package tokenauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quivermq/quiver/core/auth"
)

// ID is the plugin's name; its configuration section is auth.token:
// auth.token.enabled turns it on, auth.token.tokens, auth.token.topics and
// auth.token.admins configure it.
const ID = "token"

// Config is the auth.token section.
type Config struct {
	// Tokens maps each access key to its token.
	Tokens map[string]string `koanf:"tokens"`
	// Topics maps an access key to the topics it may publish to and
	// subscribe from ("*" for all), with its consumer groups.
	Topics map[string][]string `koanf:"topics"`
	// Admins are access keys that may do everything.
	Admins []string `koanf:"admins"`
}

// Validate checks the section.
func (c *Config) Validate() error {
	if len(c.Tokens) == 0 {
		return errors.New("auth.token.tokens: at least one access key is required")
	}
	for ak, tok := range c.Tokens {
		if len(tok) < 8 {
			return fmt.Errorf("auth.token.tokens.%s: a token has at least 8 characters", ak)
		}
	}
	for _, ak := range c.Admins {
		if _, ok := c.Tokens[ak]; !ok {
			return fmt.Errorf("auth.token.admins: %q has no token in auth.token.tokens", ak)
		}
	}
	return nil
}

// Auth is the plugin: its own copy of the configuration, read-only after
// New, so it is safe for concurrent use and keeps nothing of a request.
type Auth struct {
	tokens map[string][]byte
	topics map[string][]string
	admins []string
}

var (
	_ auth.Authenticator = (*Auth)(nil)
	_ auth.Authorizer    = (*Auth)(nil)
)

// New builds the plugin from a validated config.
func New(cfg *Config) (*Auth, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Auth{tokens: map[string][]byte{}, topics: map[string][]string{}, admins: slices.Clone(cfg.Admins)}
	for ak, tok := range cfg.Tokens {
		a.tokens[ak] = []byte(tok)
	}
	for ak, ts := range cfg.Topics {
		a.topics[ak] = slices.Clone(ts)
	}
	return a, nil
}

// Authenticate implements auth.Authenticator. The error names the access
// key, never a token.
func (a *Auth) Authenticate(_ context.Context, req auth.Request) (auth.Principal, error) {
	ak := req.ExtFields["AccessKey"]
	if ak == "" {
		return auth.Principal{}, fmt.Errorf("%w: tokenauth: no AccessKey", auth.ErrUnauthenticated)
	}
	want, ok := a.tokens[ak]
	if !ok || subtle.ConstantTimeCompare(want, []byte(req.ExtFields["SecurityToken"])) != 1 {
		return auth.Principal{}, fmt.Errorf("%w: tokenauth: wrong or missing token for %s", auth.ErrUnauthenticated, ak)
	}
	return auth.Principal{AccessKey: ak, Admin: slices.Contains(a.admins, ak)}, nil
}

// Authorize implements auth.Authorizer: admins may do everything, others
// the topics listed for them (a group's resource is %RETRY%<group>: the
// list names the group itself).
func (a *Auth) Authorize(_ context.Context, p auth.Principal, res auth.Resource, act auth.Action) error {
	if p.Admin || p.Trusted {
		return nil
	}
	if act != auth.Admin {
		name := res.Name
		if res.IsGroup {
			name = strings.TrimPrefix(name, "%RETRY%")
		}
		for _, t := range a.topics[p.AccessKey] {
			if t == "*" || t == name {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: tokenauth: %s may not %s %q", auth.ErrDenied, p.AccessKey, actionName(act), res.Name)
}

func actionName(act auth.Action) string {
	switch act {
	case auth.Pub:
		return "publish to"
	case auth.Sub:
		return "subscribe to"
	case auth.Admin:
		return "administer"
	}
	return "use"
}

// Provider registers the plugin with the kernel: an auth.Define
// descriptor, so the plugin is written against *Config only.
type Provider = auth.Descriptor[Config]

// NewProvider returns the provider, for a binary's kernel.Plugins.
func NewProvider() *Provider {
	return auth.Define(ID, func() *Config { return &Config{} },
		func(_ context.Context, c *Config, _ auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
			a, err := New(c)
			if err != nil {
				return nil, nil, err
			}
			return a, a, nil
		})
}
