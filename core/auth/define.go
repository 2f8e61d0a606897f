package auth

import (
	"context"
	"errors"

	"github.com/quivermq/quiver/core/plugin"
)

// ErrBadConfig reports a configuration value of the wrong type handed to
// an auth plugin's Open.
var ErrBadConfig = errors.New("auth: bad config")

// Descriptor is a Provider written once, typed: the plugin's config type
// C, its defaults and its open function. Define makes one; the kernel
// sees only the Provider interface.
type Descriptor[C any] struct {
	plugin.Base[C]
	open func(ctx context.Context, cfg *C, deps Deps) (Authenticator, Authorizer, error)
}

var _ Provider = (*Descriptor[struct{}])(nil)

// Define describes an auth plugin: id is its name (section auth.<id>:
// auth.<id>.enabled turns it on, the other keys are its config),
// newConfig returns a pointer to its defaults, open builds the
// authenticator and authorizer. For example:
//
//	func NewProvider() *auth.Descriptor[Config] { return auth.Define("token", NewConfig, open) }
//
// Open converts the kernel's configuration value once (ConfigOf), so open
// always gets a non-nil *C. Define panics on an empty id or a nil
// function (a programmer error).
func Define[C any](id string, newConfig func() *C, open func(ctx context.Context, cfg *C, deps Deps) (Authenticator, Authorizer, error)) *Descriptor[C] {
	if id == "" || newConfig == nil || open == nil {
		panic("auth: Define needs an id, newConfig and open")
	}
	return &Descriptor[C]{Base: plugin.NewBase("auth", id, newConfig, ErrBadConfig), open: open}
}

// ConfigOf returns cfg as the *C of the plugin id: nil (or a nil *C)
// means newConfig(); another type is an error wrapping ErrBadConfig.
func ConfigOf[C any](id string, cfg any, newConfig func() *C) (*C, error) {
	return plugin.Config("auth."+id, cfg, newConfig, ErrBadConfig)
}

// Open implements Provider.
func (d *Descriptor[C]) Open(ctx context.Context, cfg any, deps Deps) (Authenticator, Authorizer, error) {
	c, err := d.Config(cfg)
	if err != nil {
		return nil, nil, err
	}
	return d.open(ctx, c, deps)
}
