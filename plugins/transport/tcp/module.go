package tcp

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the TCP transport.
var Module = fx.Module("transport.tcp", fx.Provide(kernel.AsTransport(NewProvider)))
