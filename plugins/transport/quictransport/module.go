package quictransport

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the QUIC transport.
var Module = fx.Module("transport.quic", fx.Provide(kernel.AsTransport(NewProvider)))
