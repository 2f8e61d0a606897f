// Package filter is the seam for broker-side message filtering. Each
// expression type (RocketMQ's TAG and SQL92, or any name a plugin author
// picks) is a plugin that compiles an expression into a Matcher once per
// subscription. The conformance suite lives in filtertest.
package filter

import (
	"errors"
	"fmt"

	"github.com/quivermq/quiver/core/message"
)

// Standard expression types, as the client sends them.
const (
	TypeTag   = "TAG"
	TypeSQL92 = "SQL92"
)

// ErrUnknownType is returned for an expression type no plugin provides.
var ErrUnknownType = errors.New("filter: unknown expression type")

// SyntaxError reports an expression that does not compile.
type SyntaxError struct {
	Type     string
	Expr     string
	Pos      int
	Expected string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: %s expression %q: at position %d: %s", e.Type, e.Expr, e.Pos, e.Expected)
}

// Matcher decides whether a message matches a subscription. A compiled
// Matcher is shared by every pull of a subscription: Match is safe for
// concurrent use. props is borrowed for the call (a reader may decode each
// record into one reused map): a Matcher keeps nothing of it after Match
// returns (filtertest.CheckBorrowedInputs checks it). Compile's expr is a
// string and may be kept.
type Matcher interface {
	Match(props message.Properties) bool
}

// TagsCodeMatcher is implemented by matchers that can pre-filter on the
// consume queue's tag hash. MatchTagsCode may return false positives (the
// exact Match runs afterwards) but never false negatives.
type TagsCodeMatcher interface {
	MatchTagsCode(code int64) bool
}

// AllMatcher reports matchers that accept every message, so readers can
// skip decoding.
type AllMatcher interface {
	MatchesAll() bool
}

// TagsCoder is implemented by the TAG compiler: it gives the tag code a
// message's consume-queue entry must carry so that its matchers'
// MatchTagsCode never rejects it (multi-tag messages included).
type TagsCoder interface {
	TagsCode(tags string) int64
}

// Compiler compiles expressions of one type.
type Compiler interface {
	Compile(expr string) (Matcher, error)
}

// Provider describes a filter plugin (fx group "filter"). Write one with
// Define (a typed config, no conversion by hand).
type Provider interface {
	// ID is the plugin name ("tag", "sql92").
	ID() string
	// Type is the expression type clients name ("TAG", "SQL92").
	Type() string
	NewConfig() any
	New(cfg any) (Compiler, error)
}
