package commitlog

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the CommitLog storage engine.
var Module = fx.Module("storage.commitlog", fx.Provide(kernel.AsStorage(NewProvider)))
