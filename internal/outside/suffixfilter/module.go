package suffixfilter

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the SUFFIX filter; add it to a server binary's graph.
var Module = fx.Module("filter.suffix", fx.Provide(kernel.AsFilter(NewProvider)))
