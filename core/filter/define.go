package filter

import (
	"errors"

	"github.com/quivermq/quiver/core/plugin"
)

// ErrBadConfig reports a configuration value of the wrong type handed to
// a filter's New.
var ErrBadConfig = errors.New("filter: bad config")

// Descriptor is a Provider written once, typed: the filter's config type
// C, its defaults and its compiler constructor. Define makes one; the
// kernel sees only the Provider interface.
type Descriptor[C any] struct {
	plugin.Base[C]
	typ         string
	newCompiler func(cfg *C) (Compiler, error)
}

var _ Provider = (*Descriptor[struct{}])(nil)

// Define describes a filter: id is its name (section filter.<id>), typ
// the expression type clients name (TypeTag, TypeSQL92), newConfig
// returns a pointer to its defaults and newCompiler validates the config
// and builds the compiler. For example:
//
//	func NewProvider() *filter.Descriptor[Config] { return filter.Define("tag", filter.TypeTag, NewConfig, newCompiler) }
//
// New converts the kernel's configuration value once (ConfigOf), so
// newCompiler always gets a non-nil *C. Define panics on an empty id or
// type or a nil function (a programmer error).
func Define[C any](id, typ string, newConfig func() *C, newCompiler func(cfg *C) (Compiler, error)) *Descriptor[C] {
	if id == "" || typ == "" || newConfig == nil || newCompiler == nil {
		panic("filter: Define needs an id, a type, newConfig and newCompiler")
	}
	return &Descriptor[C]{Base: plugin.NewBase("filter", id, newConfig, ErrBadConfig), typ: typ, newCompiler: newCompiler}
}

// ConfigOf returns cfg as the *C of the filter id: nil (or a nil *C)
// means newConfig(); another type is an error wrapping ErrBadConfig.
func ConfigOf[C any](id string, cfg any, newConfig func() *C) (*C, error) {
	return plugin.Config("filter."+id, cfg, newConfig, ErrBadConfig)
}

// Type implements Provider.
func (d *Descriptor[C]) Type() string { return d.typ }

// New implements Provider.
func (d *Descriptor[C]) New(cfg any) (Compiler, error) {
	c, err := d.Config(cfg)
	if err != nil {
		return nil, err
	}
	return d.newCompiler(c)
}
