//go:build nogrpc

package server

import (
	"fmt"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
)

// A build with -tags nogrpc leaves out the RocketMQ 5 gRPC endpoint, its
// gRPC and protobuf libraries with it (the edge build, docs/guide/edge.md:
// about 2.5 MB less binary, all of it resident while the broker runs).
// The grpc section is still known, so a configuration written for the
// full build loads; a configuration that turns the endpoint on is refused
// with the reason instead of starting without it.
var (
	grpcSection      = &kernel.Section{Key: "grpc", Decode: decodeNoGRPC}
	grpcBrokerModule = fx.Options()
	grpcDevModule    = fx.Options()
)

// noGRPC is the grpc section's setting in a nogrpc build.
type noGRPC struct{}

func decodeNoGRPC(c *config.Config) (any, error) {
	if v := c.Get("grpc.enabled"); v != nil && fmt.Sprint(v) == "true" {
		return noGRPC{}, fmt.Errorf("grpc.enabled: this mq was built with -tags nogrpc, without the RocketMQ 5 gRPC endpoint: build it without the tag to serve 5.x clients")
	}
	return noGRPC{}, nil
}
