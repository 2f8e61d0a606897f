// Package grpcapi is the generated Go code of the RocketMQ 5 gRPC messaging
// API (protobuf package apache.rocketmq.v2: MessagingService and its
// messages), from the .proto files under proto/, which are the upstream
// rocketmq-apis definitions with a go_package option added; the wire names
// are unchanged so the official 5.x clients interoperate.
//
// PROTO_PIN names the upstream commit the .proto files are taken from (with
// the git blob id each file has there) and the tool versions that generated
// the committed code. pin_test.go checks both: the .proto files hash to the
// pinned blobs, every message, field, enum value and RPC of the .proto files
// is in the descriptors embedded in the generated Go (and nothing else is),
// and, where protoc is on PATH, regenerating reproduces the committed files
// byte for byte. TestToolPin checks the generated headers name the pinned
// tools and go.mod requires the pinned protoc-gen-go's protobuf module.
//
// The generated files are committed, so a plain go build needs neither
// protoc nor its plugins. To regenerate with the pinned tools (Debian's
// protobuf-compiler package is protoc 3.21.12):
//
//	GOBIN=/tmp/pgbin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.8
//	GOBIN=/tmp/pgbin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
//	PATH=/tmp/pgbin:$PATH go generate ./core/grpcapi
package grpcapi

//go:generate protoc -I proto --go_out=../.. --go_opt=module=github.com/quivermq/quiver --go-grpc_out=../.. --go-grpc_opt=module=github.com/quivermq/quiver apache/rocketmq/v2/definition.proto apache/rocketmq/v2/service.proto
