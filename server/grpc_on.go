//go:build !nogrpc

package server

import "github.com/quivermq/quiver/modules/grpc"

// The RocketMQ 5 gRPC endpoint (modules/grpc) of the broker roles; a
// build with -tags nogrpc leaves it out (grpc_off.go).
var (
	grpcSection      = &grpc.ConfigSection
	grpcBrokerModule = grpc.Module
	grpcDevModule    = grpc.DevModule
)
