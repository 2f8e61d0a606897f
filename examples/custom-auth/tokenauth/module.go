package tokenauth

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the plugin. Add it to a binary's fx graph; token.enabled
// turns it on.
var Module = fx.Module("auth.token", fx.Provide(kernel.AsAuth(NewProvider)))
