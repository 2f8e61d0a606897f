package regexfilter

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the REGEX filter. Add it to a binary's fx graph.
var Module = fx.Module("filter.regex", fx.Provide(kernel.AsFilter(NewProvider)))
