package natstransport

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the NATS transport.
var Module = fx.Module("transport.nats", fx.Provide(kernel.AsTransport(NewProvider)))
