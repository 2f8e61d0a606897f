package broker

import (
	"fmt"
	"strings"
	"sync"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
)

// filterCache compiles subscription expressions once and reuses them.
type filterCache struct {
	compilers map[string]filter.Compiler
	mu        sync.RWMutex
	cache     map[filterKey]filter.Matcher
}

// filterKey is a cached matcher's type and expression (a struct: looking
// one up for a pull allocates nothing).
type filterKey struct{ typ, expr string }

const filterCacheMax = 4096

func newFilterCache(c map[string]filter.Compiler) *filterCache {
	if c == nil {
		c = map[string]filter.Compiler{}
	}
	return &filterCache{compilers: c, cache: map[filterKey]filter.Matcher{}}
}

// compile returns the matcher of (type, expr). An empty type means TAG.
func (f *filterCache) compile(typ, expr string) (filter.Matcher, error) {
	typ = strings.ToUpper(strings.TrimSpace(typ))
	if typ == "" {
		typ = filter.TypeTag
	}
	key := filterKey{typ, expr}
	f.mu.RLock()
	m, ok := f.cache[key]
	f.mu.RUnlock()
	if ok {
		return m, nil
	}
	c, ok := f.compilers[typ]
	if !ok {
		if typ == filter.TypeTag {
			// No tag plugin composed: accept everything, the client
			// filters again by tag.
			return matchAll{}, nil
		}
		return nil, fmt.Errorf("%w: %s (this broker serves: %s)", filter.ErrUnknownType, typ, f.types())
	}
	m, err := c.Compile(expr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if len(f.cache) >= filterCacheMax {
		for k := range f.cache {
			delete(f.cache, k)
			break
		}
	}
	f.cache[key] = m
	f.mu.Unlock()
	return m, nil
}

func (f *filterCache) types() string {
	var out []string
	for k := range f.compilers {
		out = append(out, k)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

type matchAll struct{}

func (matchAll) Match(message.Properties) bool { return true }
func (matchAll) MatchesAll() bool              { return true }

func matchesAll(m filter.Matcher) bool {
	a, ok := m.(filter.AllMatcher)
	return ok && a.MatchesAll()
}
