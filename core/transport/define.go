package transport

import (
	"context"
	"errors"

	"github.com/quivermq/quiver/core/plugin"
)

// ErrBadConfig reports a configuration value of the wrong type handed to
// a transport's Listen or Dial.
var ErrBadConfig = errors.New("transport: bad config")

// Descriptor is a Provider written once, typed: the transport's config
// type C, its defaults, and its listen and dial functions. Define makes
// one; the kernel sees only the Provider interface.
type Descriptor[C any] struct {
	plugin.Base[C]
	listen func(ctx context.Context, addr string, cfg *C, deps Deps) (Listener, error)
	dial   func(ctx context.Context, addr string, cfg *C, deps Deps) (Conn, error)
}

var _ Provider = (*Descriptor[struct{}])(nil)

// Define describes a transport: id is its name in transports (and its
// section transport.<id>), newConfig returns a pointer to its defaults,
// listen binds synchronously and dial connects. For example:
//
//	func NewProvider() *transport.Descriptor[Config] { return transport.Define("tcp", NewConfig, listen, dial) }
//
// Listen and Dial convert the kernel's configuration value once
// (ConfigOf), so listen and dial always get a non-nil *C. Define panics on
// an empty id or a nil function (a programmer error).
func Define[C any](id string, newConfig func() *C,
	listen func(ctx context.Context, addr string, cfg *C, deps Deps) (Listener, error),
	dial func(ctx context.Context, addr string, cfg *C, deps Deps) (Conn, error)) *Descriptor[C] {
	if id == "" || newConfig == nil || listen == nil || dial == nil {
		panic("transport: Define needs an id, newConfig, listen and dial")
	}
	return &Descriptor[C]{Base: plugin.NewBase("transport", id, newConfig, ErrBadConfig), listen: listen, dial: dial}
}

// ConfigOf returns cfg as the *C of the transport id: nil (or a nil *C)
// means newConfig(); another type is an error wrapping ErrBadConfig.
func ConfigOf[C any](id string, cfg any, newConfig func() *C) (*C, error) {
	return plugin.Config("transport."+id, cfg, newConfig, ErrBadConfig)
}

// Listen implements Provider.
func (d *Descriptor[C]) Listen(ctx context.Context, addr string, cfg any, deps Deps) (Listener, error) {
	c, err := d.Config(cfg)
	if err != nil {
		return nil, err
	}
	return d.listen(ctx, addr, c, deps)
}

// Dial implements Provider.
func (d *Descriptor[C]) Dial(ctx context.Context, addr string, cfg any, deps Deps) (Conn, error) {
	c, err := d.Config(cfg)
	if err != nil {
		return nil, err
	}
	return d.dial(ctx, addr, c, deps)
}
