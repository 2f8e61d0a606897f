package pebblestore

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the Pebble storage engine.
var Module = fx.Module("storage.pebble", fx.Provide(kernel.AsStorage(NewProvider)))
