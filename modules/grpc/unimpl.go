package grpc

import (
	"github.com/quivermq/quiver/core/grpcapi"
)

// The RPCs below (and the consumption RPCs without a pop service) are not
// served yet: each answers the RocketMQ status
// NOT_IMPLEMENTED (50100) in its response, which the official clients
// surface as a clear error, rather than a bare gRPC UNIMPLEMENTED.

func notImplemented(what string) *grpcapi.Status {
	return status(grpcapi.Code_NOT_IMPLEMENTED, what+" is not implemented on this endpoint yet")
}
