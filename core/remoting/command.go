// Package remoting serves and makes RocketMQ remoting calls over frame
// connections: a Peer per connection matches responses to pending calls
// by opaque, runs oneway and async calls, and hands requests to a Router,
// which dispatches request codes to the handlers modules register. The
// RemotingCommand and its wire format are package codec.
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
