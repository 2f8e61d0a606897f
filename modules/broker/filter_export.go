package broker

import "github.com/quivermq/quiver/core/filter"

// CompileFilter returns the (cached) matcher of a subscription expression
// of type typ (TAG when empty, SQL92, ... as the filter plugins register),
// for consumers served outside the remoting handlers (the gRPC endpoint).
func (b *Broker) CompileFilter(typ, expr string) (filter.Matcher, error) {
	return b.filters.compile(typ, expr)
}
