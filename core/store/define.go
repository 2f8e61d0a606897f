package store

import (
	"context"

	"github.com/quivermq/quiver/core/plugin"
)

// Descriptor is a Provider written once, typed: the engine's config type
// C, its defaults and its open function. Define makes one; the kernel
// sees only the Provider interface.
type Descriptor[C any] struct {
	plugin.Base[C]
	open func(ctx context.Context, cfg *C, deps Deps) (Store, error)
}

var _ Provider = (*Descriptor[struct{}])(nil)

// Define describes a storage engine: id is its name in storage.engine
// (and its section storage.<id>), newConfig returns a pointer to its
// defaults, open opens the store. For example:
//
//	func NewProvider() *store.Descriptor[Config] { return store.Define("commitlog", NewConfig, open) }
//
// Open converts the kernel's configuration value once (ConfigOf), so open
// always gets a non-nil *C. Define panics on an empty id or a nil
// function (a programmer error).
func Define[C any](id string, newConfig func() *C, open func(ctx context.Context, cfg *C, deps Deps) (Store, error)) *Descriptor[C] {
	if id == "" || newConfig == nil || open == nil {
		panic("store: Define needs an id, newConfig and open")
	}
	return &Descriptor[C]{Base: plugin.NewBase("storage", id, newConfig, ErrBadArgument), open: open}
}

// ConfigOf returns cfg as the *C of the engine id: nil (or a nil *C)
// means newConfig(); another type is an error wrapping ErrBadArgument.
// Optional interfaces of an engine (Truncater) use it too.
func ConfigOf[C any](id string, cfg any, newConfig func() *C) (*C, error) {
	return plugin.Config("storage."+id, cfg, newConfig, ErrBadArgument)
}

// Open implements Provider.
func (d *Descriptor[C]) Open(ctx context.Context, cfg any, deps Deps) (Store, error) {
	c, err := d.Config(cfg)
	if err != nil {
		return nil, err
	}
	return d.open(ctx, c, deps)
}
