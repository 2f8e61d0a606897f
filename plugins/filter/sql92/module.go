package sql92

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the SQL92 filter.
var Module = fx.Module("filter.sql92", fx.Provide(kernel.AsFilter(NewProvider)))
