// Package remoting implements RocketMQ's RemotingCommand: the frame codec
// (JSON and ROCKETMQ binary headers), request/response matching by opaque,
// oneway and async calls, server-initiated requests, and a server that
// dispatches request codes to processors registered by modules.
package remoting

import (
	"strconv"
	"sync/atomic"
)

// Serialize types (high byte of the header-length word).
const (
	SerializeJSON     byte = 0
	SerializeRocketMQ byte = 1
)

// Flag bits.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// Language codes of the binary header.
var languageCodes = map[string]byte{
	"JAVA": 0, "CPP": 1, "DOTNET": 2, "PYTHON": 3, "DELPHI": 4, "ERLANG": 5,
	"RUBY": 6, "OTHER": 7, "HTTP": 8, "GO": 9, "PHP": 10, "OMS": 11, "RUST": 12,
}

var languageNames = func() map[byte]string {
	m := make(map[byte]string, len(languageCodes))
	for k, v := range languageCodes {
		m[v] = k
	}
	return m
}()

// Our own language and version on the wire. Version 409 is V4_9_8.
const (
	ServerLanguage = "JAVA"
	ServerVersion  = 409
)

// Command is one RemotingCommand, request or response.
type Command struct {
	Code      int32
	Language  string
	Version   int32
	Opaque    int32
	Flag      int32
	Remark    string
	ExtFields map[string]string
	Body      []byte
	// BodyParts, when set on an outgoing command, is sent as the body
	// instead of Body, without concatenating (pull responses).
	BodyParts [][]byte
	// SerializeType is the header encoding the command arrived in, and the
	// one its answer is written in.
	SerializeType byte
}

var opaqueSeq atomic.Int32

// NextOpaque returns a process-wide increasing request id.
func NextOpaque() int32 { return opaqueSeq.Add(1) }

// NewRequest builds a request with a fresh opaque.
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	if ext == nil {
		ext = map[string]string{}
	}
	return &Command{Code: code, Language: ServerLanguage, Version: ServerVersion, Opaque: NextOpaque(), ExtFields: ext, Body: body}
}

// NewResponse builds the response to req with the given code and remark.
func NewResponse(req *Command, code int32, remark string) *Command {
	return &Command{
		Code: code, Language: ServerLanguage, Version: ServerVersion,
		Opaque: req.Opaque, Flag: FlagResponse, Remark: remark,
		ExtFields: map[string]string{}, SerializeType: req.SerializeType,
	}
}

// Errorf builds an error response.
func Errorf(req *Command, code int32, remark string) *Command {
	return NewResponse(req, code, remark)
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the oneway bit is set.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Ext returns an extFields value.
func (c *Command) Ext(k string) string { return c.ExtFields[k] }

// SetExt sets an extFields value, allocating the map if needed.
func (c *Command) SetExt(k, v string) {
	if c.ExtFields == nil {
		c.ExtFields = map[string]string{}
	}
	c.ExtFields[k] = v
}

// SetExtInt sets a decimal extFields value.
func (c *Command) SetExtInt(k string, v int64) { c.SetExt(k, strconv.FormatInt(v, 10)) }
