package tag

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the TAG filter.
var Module = fx.Module("filter.tag", fx.Provide(kernel.AsFilter(NewProvider)))
