package broker

import (
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// FilterReadOptions turns a matcher into store read options for modules
// reading a queue on a consumer's behalf (pop, the gRPC pull): the
// tag-code pre-filter when the matcher has one, then the exact match on
// each record's properties. A nil or match-all matcher reads everything.
func FilterReadOptions(m filter.Matcher) store.ReadOptions {
	var opts store.ReadOptions
	if m == nil || matchesAll(m) {
		return opts
	}
	if tm, ok := m.(filter.TagsCodeMatcher); ok {
		opts.Filter = tm.MatchTagsCode
	}
	opts.Match = func(rec []byte) bool {
		ext, _, err := message.DecodeStored(rec)
		return err == nil && m.Match(ext.Properties)
	}
	return opts
}
