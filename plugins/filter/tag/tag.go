// Package tag is RocketMQ's TAG expression filter: a subscription such as
// "TagA || TagB" matches messages whose TAGS property is one of the listed
// tags, and "*" matches everything.
//
// # Broker-side use
//
// When the broker stores a message it records
//
//	code := tag.TagsCode(props[message.PropertyTags])
//
// as the consume-queue entry's tagsCode. When it serves a pull it compiles
// the subscription once (Compile, or the Compiler from the provider) and,
// per entry,
//
//  1. skips the entry when the matcher's MatchTagsCode(code) is false
//     (cheap: no message read, never a false negative);
//  2. otherwise reads the message and keeps it when Match(props) is true
//     (exact string comparison, which removes hash collisions).
//
// A matcher whose MatchesAll is true accepts every entry, so the broker can
// skip both steps.
//
// # Hashes
//
// Subscription codes are computed here with Java's String.hashCode over
// UTF-16 code units (message.TagsHashCode) from the tag strings; the codeSet
// a client sends in its heartbeat is never trusted, because the Go client
// hashes UTF-8 bytes and disagrees with Java for non-ASCII tags.
//
// # Multi-tag messages
//
// RocketMQ gives a message one tag, but nothing stops a producer from
// setting TAGS to "TagA||TagB". Quiver treats such a value as several tags:
// the message matches when any of them (each trimmed, empties dropped) is
// subscribed. Java's broker would store the hash of the whole string, which
// equals no single tag's hash, so its pre-filter would drop the message for
// a "TagA" subscriber. To avoid that false negative, TagsCode returns
// MultiTagsCode for a value containing "||". MultiTagsCode lies outside the
// int32 range, so it is no tag's hash, and MatchTagsCode answers true for
// every code outside that range ("cannot rule it out"); the exact Match then
// decides. The cost is that multi-tag messages are always read, never
// skipped by the pre-filter. A store that recorded plain
// message.TagsHashCode for such a message would lose it for single-tag
// subscribers: use TagsCode. Code that cannot import this package (the
// broker module) reaches it through the filter.Compiler the provider
// returns, which has a TagsCode method:
//
//	code := message.TagsHashCode
//	if tc, ok := compiler.(interface{ TagsCode(string) int64 }); ok {
//		code = tc.TagsCode
//	}
//
// Multi-tag matching is a broker-side extension. Stock RocketMQ clients
// filter pulled messages again by comparing the whole TAGS string with
// their tag set, so they drop a "TagA||TagB" message that the broker
// delivered to a "TagA" subscriber; only "*" subscribers see it.
package tag

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
)

// ID is the plugin ID.
const ID = "tag"

// Separator separates tags in an expression and in a multi-tag TAGS value.
const Separator = "||"

// MultiTagsCode is the tagsCode stored for a message whose TAGS value holds
// several "||"-separated tags. It is outside the int32 range, so it never
// equals a String.hashCode, and every TAG matcher's MatchTagsCode accepts it.
const MultiTagsCode = message.MultiTagsCode

// TagsCode returns the tagsCode the broker must store for a message whose
// TAGS property is tags: Java's String.hashCode of tags (0 when empty), as
// a Java broker stores it, except that a value containing "||" gets
// MultiTagsCode so that the pre-filter never drops it.
func TagsCode(tags string) int64 { return message.TagsCode(tags) }

// ParseTags returns the tags of a TAG expression the way a heartbeat's
// tagsSet lists them: split on "||", each trimmed, empties dropped, sorted,
// without duplicates. It returns nil for "*" and for a blank expression
// (subscribe to all). It does not validate: Compile does, and rejects
// expressions that ParseTags would turn into an empty list or that mix "*"
// with tags.
func ParseTags(expr string) []string {
	if isAll(expr) {
		return nil
	}
	var tags []string
	for t := range splitTags(expr) {
		tags = append(tags, t.tag)
	}
	if len(tags) == 0 {
		return nil
	}
	slices.Sort(tags)
	return slices.Compact(tags)
}

func isAll(expr string) bool {
	e := trim(expr)
	return e == "" || e == "*"
}

type posTag struct {
	tag string
	pos int // byte offset of the tag in the expression
}

// splitTags yields the trimmed, non-empty tags of s with their offsets.
func splitTags(s string) func(yield func(posTag) bool) {
	return func(yield func(posTag) bool) {
		off := 0
		for {
			part, rest, found := strings.Cut(s[off:], Separator)
			t := strings.TrimLeftFunc(part, isSpace)
			lead := len(part) - len(t)
			t = strings.TrimRightFunc(t, isSpace)
			if t != "" && !yield(posTag{tag: t, pos: off + lead}) {
				return
			}
			if !found {
				return
			}
			off = len(s) - len(rest)
		}
	}
}

// isSpace is what Java's String.trim strips: every char up to U+0020. The
// Java broker and client trim tags this way; the Go client strips only
// spaces, so the two agree on the tags anyone writes. (strings.TrimSpace
// would also strip U+0085 and U+00A0, which neither client does.)
func isSpace(r rune) bool { return r <= ' ' }

func trim(s string) string { return strings.TrimFunc(s, isSpace) }

// Compile compiles a TAG expression. "*" and blank expressions match every
// message. Otherwise the expression is split on "||" and each tag trimmed;
// empty tags are dropped. An expression left with no tag (such as "||"),
// or one that combines "*" with tags (such as "TagA || *"), is a
// *filter.SyntaxError: Java would accept both and silently match nothing,
// or only the literal tag "*".
func Compile(expr string) (*Matcher, error) {
	if isAll(expr) {
		return &Matcher{all: true}, nil
	}
	var tags []string
	for t := range splitTags(expr) {
		if t.tag == "*" {
			return nil, &filter.SyntaxError{Type: filter.TypeTag, Expr: expr, Pos: t.pos,
				Expected: `a tag ("*" subscribes to all tags and cannot be combined with others)`}
		}
		tags = append(tags, t.tag)
	}
	if len(tags) == 0 {
		return nil, &filter.SyntaxError{Type: filter.TypeTag, Expr: expr, Pos: 0,
			Expected: `a tag (the expression has only "||" separators and spaces)`}
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	codes := make([]int32, len(tags))
	for i, t := range tags {
		codes[i] = int32(message.TagsHashCode(t))
	}
	slices.Sort(codes)
	codes = slices.Compact(codes)
	return &Matcher{tags: slices.Clip(tags), codes: slices.Clip(codes)}, nil
}

// Matcher is a compiled TAG expression. It is immutable, so one Matcher may
// be shared by any number of goroutines.
type Matcher struct {
	all   bool
	tags  []string // sorted, unique
	codes []int32  // sorted, unique Java hashes of tags
}

var (
	_ filter.Matcher         = (*Matcher)(nil)
	_ filter.TagsCodeMatcher = (*Matcher)(nil)
	_ filter.AllMatcher      = (*Matcher)(nil)
)

// linearMax is the set size up to which a linear scan beats binary search.
const linearMax = 8

// Match reports whether the message's TAGS property is a subscribed tag.
// A single tag is compared exactly, as Java's client does (no trimming). A
// value containing "||" matches when any of its tags, each trimmed, is
// subscribed. It does not allocate.
func (m *Matcher) Match(props message.Properties) bool {
	if m.all {
		return true
	}
	tags := props[message.PropertyTags]
	if !strings.Contains(tags, Separator) {
		return m.hasTag(tags)
	}
	for rest := tags; ; {
		t, after, found := strings.Cut(rest, Separator)
		if t = trim(t); t != "" && m.hasTag(t) {
			return true
		}
		if !found {
			return false
		}
		rest = after
	}
}

// MatchTagsCode is the consume-queue pre-filter: it is false only when no
// message stored with this tagsCode (see TagsCode) can match. Codes outside
// the int32 range, MultiTagsCode among them, are not tag hashes and always
// pass. It does not allocate.
func (m *Matcher) MatchTagsCode(code int64) bool {
	if m.all {
		return true
	}
	c := int32(code)
	if int64(c) != code {
		return true
	}
	if len(m.codes) <= linearMax {
		return slices.Contains(m.codes, c)
	}
	_, ok := slices.BinarySearch(m.codes, c)
	return ok
}

// MatchesAll reports whether the expression was "*" or blank.
func (m *Matcher) MatchesAll() bool { return m.all }

// Tags returns the subscribed tags, sorted; nil when MatchesAll.
func (m *Matcher) Tags() []string { return slices.Clone(m.tags) }

func (m *Matcher) hasTag(t string) bool {
	if t == "" {
		return false
	}
	if len(m.tags) <= linearMax {
		return slices.Contains(m.tags, t)
	}
	_, ok := slices.BinarySearch(m.tags, t)
	return ok
}

// Compiler compiles TAG expressions; it is the filter.Compiler the
// provider returns.
type Compiler struct{}

var _ filter.Compiler = (*Compiler)(nil)

// NewCompiler returns a compiler for cfg (nil means defaults).
func NewCompiler(cfg *Config) *Compiler { return &Compiler{} }

// Compile implements filter.Compiler; see the package-level Compile.
func (c *Compiler) Compile(expr string) (filter.Matcher, error) {
	m, err := Compile(expr)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// TagsCode is the package-level TagsCode, as a method so that code holding
// only the filter.Compiler (the broker, the filtertest suite) can find it
// with a type assertion to interface{ TagsCode(string) int64 }.
func (c *Compiler) TagsCode(tags string) int64 { return TagsCode(tags) }

// Provider is the TAG filter descriptor registered with the kernel.
type Provider = filter.Descriptor[Config]

// NewProvider returns the provider (filter.Define).
func NewProvider() *Provider {
	return filter.Define(ID, filter.TypeTag, NewConfig, func(c *Config) (filter.Compiler, error) {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("filter.tag: %w", err)
		}
		return NewCompiler(c), nil
	})
}
