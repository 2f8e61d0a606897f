// Package remoting serves and makes RocketMQ remoting calls over frame
// connections; the RemotingCommand and its wire format are package codec.
// A Peer is one connection, made of parts with one job each: its reader
// (Run, dispatch.go: decode, then a worker goroutine or, for Inline
// handlers, the reader itself with answers batched, inline.go), its
// pending-call table (pending.go; async callbacks and the sweep,
// async.go) and its writer (writer.go: a type handed the Conn, how to
// fail it and how to start its goroutine). The Router (router.go)
// dispatches request codes to the handlers modules register, each with
// the Mode its author promises; Server and Client own the Peers.
package remoting

import "github.com/quivermq/quiver/core/remoting/codec"

// Command is one RemotingCommand, request or response (codec.Command).
type Command = codec.Command

// NewRequest builds a request with a fresh opaque (codec.NewRequest).
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	return codec.NewRequest(code, ext, body)
}

// NewResponse builds the response to req with the given code and remark
// (codec.NewResponse).
func NewResponse(req *Command, code int32, remark string) *Command {
	return codec.NewResponse(req, code, remark)
}

// Errorf builds an error response (NewResponse).
func Errorf(req *Command, code int32, remark string) *Command {
	return codec.NewResponse(req, code, remark)
}
