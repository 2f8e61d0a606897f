// Package plugin holds what the descriptors of the four seams share
// (store.Define, transport.Define, filter.Define, auth.Define): the
// plugin's ID and defaults (Base, which each seam's Descriptor embeds) and
// the one checked conversion from the kernel's untyped configuration
// value to the *C a plugin is written against. A plugin never sees the
// untyped value.
package plugin

import "fmt"

// Config returns cfg as the *C a plugin's descriptor expects. nil, or a
// nil *C, means the defaults (newConfig()); any other type is an error
// that names the plugin (name, e.g. "storage.commitlog"), the type given
// and the type wanted, wrapping sentinel (the seam's bad-argument error).
func Config[C any](name string, cfg any, newConfig func() *C, sentinel error) (*C, error) {
	switch c := cfg.(type) {
	case nil:
		return newConfig(), nil
	case *C:
		if c == nil {
			return newConfig(), nil
		}
		return c, nil
	}
	return nil, fmt.Errorf("%s: config is %T, want %T: %w", name, cfg, (*C)(nil), sentinel)
}

// Base is what every seam's descriptor holds: the plugin's ID, its
// defaults and the conversion of the kernel's value for its section
// <seam>.<id>.
type Base[C any] struct {
	seam, id  string
	newConfig func() *C
	sentinel  error
}

// NewBase describes plugin id of seam (the section prefix: storage,
// transport, filter, auth); sentinel is the seam's bad-config error.
func NewBase[C any](seam, id string, newConfig func() *C, sentinel error) Base[C] {
	return Base[C]{seam: seam, id: id, newConfig: newConfig, sentinel: sentinel}
}

// ID is the plugin's ID.
func (b Base[C]) ID() string { return b.id }

// NewConfig returns a pointer to the defaults (a *C).
func (b Base[C]) NewConfig() any { return b.newConfig() }

// Config converts the kernel's configuration value (see Config).
func (b Base[C]) Config(cfg any) (*C, error) {
	return Config(b.seam+"."+b.id, cfg, b.newConfig, b.sentinel)
}
