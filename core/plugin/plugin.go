// Package plugin holds what the descriptors of the four seams share
// (store.Define, transport.Define, filter.Define, auth.Define): the one
// checked conversion from the kernel's untyped configuration value to the
// *C a plugin is written against. A plugin never sees the untyped value.
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
