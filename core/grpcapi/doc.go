// Package grpcapi is the generated Go code of the RocketMQ 5 gRPC messaging
// API (protobuf package apache.rocketmq.v2: MessagingService and its
// messages), from the .proto files under proto/, which are the upstream
// rocketmq-apis definitions with a go_package option added; the wire names
// are unchanged so the official 5.x clients interoperate.
//
// The generated files are committed, so a plain go build needs neither
// protoc nor its plugins. To regenerate (protoc 3.21+, protoc-gen-go
// v1.36.8, protoc-gen-go-grpc v1.5.1 on PATH):
//
//	go generate ./core/grpcapi
package grpcapi

//go:generate protoc -I proto --go_out=../.. --go_opt=module=github.com/quivermq/quiver --go-grpc_out=../.. --go-grpc_opt=module=github.com/quivermq/quiver apache/rocketmq/v2/definition.proto apache/rocketmq/v2/service.proto
