package kernel

import (
	"fmt"
	"sort"
	"strings"
)

// Registry holds the plugins of one seam, sorted by ID.
type Registry[T any] struct {
	kind string
	ids  []string
	byID map[string]T
}

// NewRegistry indexes items by id. Two plugins with one ID is an error
// that names the ID (fx value groups have no order, so no one can win).
func NewRegistry[T any](kind string, items []T, id func(T) string) (*Registry[T], error) {
	r := &Registry[T]{kind: kind, byID: make(map[string]T, len(items))}
	for _, it := range items {
		k := id(it)
		if k == "" {
			return nil, fmt.Errorf("kernel: a %s plugin has an empty ID (%T)", kind, it)
		}
		if prev, dup := r.byID[k]; dup {
			return nil, fmt.Errorf("kernel: %s plugin %q registered twice (%T and %T)", kind, k, prev, it)
		}
		r.byID[k] = it
		r.ids = append(r.ids, k)
	}
	sort.Strings(r.ids)
	return r, nil
}

// IDs lists the registered IDs, sorted.
func (r *Registry[T]) IDs() []string { return append([]string(nil), r.ids...) }

// Get returns the plugin called id, or an error listing what exists.
func (r *Registry[T]) Get(id string) (T, error) {
	if it, ok := r.byID[id]; ok {
		return it, nil
	}
	var zero T
	if len(r.ids) == 0 {
		return zero, fmt.Errorf("unknown %s %q (none registered)", r.kind, id)
	}
	return zero, fmt.Errorf("unknown %s %q (registered: %s)", r.kind, id, strings.Join(r.ids, ", "))
}
