package codec

import (
	"strconv"
	"sync/atomic"

	"github.com/quivermq/quiver/core/transport"
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
	// Sent, when set on an outgoing command, is called once, after the
	// command's frame was handed to the transport without error: the
	// transport holds nothing of Body or BodyParts from then on, so their
	// buffer may be reused. Every path that writes a command calls it:
	// Send, Reply and InvokeOneway from the caller's goroutine before they
	// return; Invoke and InvokeAsync from the caller (a frame written
	// directly) or from the connection's writer goroutine once the batch
	// holding the frame was written. It is not called when the write
	// failed or never happened (peer closed, frame over the limit, a
	// queued frame dropped at close): a failed or timed-out write may
	// leave the transport still referring to the buffer, which is then
	// left to the garbage collector. It must not block.
	Sent func()
	// SerializeType is the header encoding the command arrived in, and the
	// one its answer is written in.
	SerializeType byte

	// ext holds the fields SetExt set on a command without an ExtFields
	// map (responses from NewResponse), in the order they were set; the
	// header encoders write them in that order, with no map and no sort.
	ext []ExtField
	// pooledExt reports that ExtFields came from the decoder's pool;
	// Release gives it back.
	pooledExt bool
	// raw holds the extFields of a request decoded without its map
	// (Options.RawSends); ExtFields is nil until ensureExtMap builds it.
	raw *rawExt
	// frame is the received frame Body aliases and recycler the
	// transport that takes it back (Release).
	frame    []byte
	recycler transport.FrameRecycler
}

// ExtField is one extFields entry.
type ExtField struct{ Key, Value string }

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

// responseBlock allocates a response together with room for the fields a
// send or pull answer sets, so building one is a single allocation.
type responseBlock struct {
	c  Command
	kv [6]ExtField
}

// NewResponse builds the response to req with the given code and remark.
// Its ExtFields map is nil: SetExt records fields in order without one
// (Ext, ExtMap and the encoders see them); code that wants a map calls
// ExtMap.
func NewResponse(req *Command, code int32, remark string) *Command {
	blk := &responseBlock{}
	blk.c = Command{
		Code: code, Language: ServerLanguage, Version: ServerVersion,
		Opaque: req.Opaque, Flag: FlagResponse, Remark: remark,
		SerializeType: req.SerializeType,
	}
	blk.c.ext = blk.kv[:0:len(blk.kv)]
	return &blk.c
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the oneway bit is set.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Ext returns an extFields value.
func (c *Command) Ext(k string) string {
	v, _ := c.LookupExt(k)
	return v
}

// LookupExt finds k in ExtFields, then among the fields SetExt recorded
// without a map.
func (c *Command) LookupExt(k string) (string, bool) {
	c.ensureExtMap()
	if c.ExtFields != nil {
		if v, ok := c.ExtFields[k]; ok {
			return v, true
		}
	}
	for i := range c.ext {
		if c.ext[i].Key == k {
			return c.ext[i].Value, true
		}
	}
	return "", false
}

// SetExt sets an extFields value: in ExtFields when c has that map (decoded
// commands, NewRequest), else in c's ordered field list.
func (c *Command) SetExt(k, v string) {
	c.ensureExtMap()
	if c.ExtFields != nil {
		c.ExtFields[k] = v
		return
	}
	for i := range c.ext {
		if c.ext[i].Key == k {
			c.ext[i].Value = v
			return
		}
	}
	c.ext = append(c.ext, ExtField{k, v})
}

// ExtMap returns all of c's extFields as its ExtFields map, first moving
// the fields SetExt recorded without one into it (a map entry wins). Use
// it where a map is needed (signing, copying); Ext and SetExt need none.
func (c *Command) ExtMap() map[string]string {
	c.ensureExtMap()
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string, len(c.ext))
	}
	for _, f := range c.ext {
		if _, ok := c.ExtFields[f.Key]; !ok {
			c.ExtFields[f.Key] = f.Value
		}
	}
	c.ext = nil
	return c.ExtFields
}

// SetExtInt sets a decimal extFields value.
func (c *Command) SetExtInt(k string, v int64) { c.SetExt(k, strconv.FormatInt(v, 10)) }

// RawField is one extFields entry of a request decoded without its map:
// its key and value, unescaped. Value is nil for a JSON null (the key is
// then absent, as if removed) and non-nil for an empty string.
type RawField struct{ Key, Value []byte }

// RawExtFields returns the extFields entries of a request decoded without
// its map, in header order, and true; it returns false when c has its
// ExtFields map (read that, Ext or ReadExt then). A key may repeat: the
// last entry wins, as in the map, and a nil Value removes the key. The
// bytes belong to the received frame: read-only, and valid until Release
// (string(v) copies what is kept). The map is not built.
func (c *Command) RawExtFields() ([]RawField, bool) {
	if c.raw == nil {
		return nil, false
	}
	return c.raw.fields, true
}

// Release hands the decoded header map back to the pool and the frame the
// command was read into back to its transport (Options.Recycler), and
// drops ExtFields and Body: the caller must keep nothing of either
// afterwards (strings read from them stay valid). It does nothing for a
// command built locally; a second call does nothing. The router releases
// the requests of handlers that keep nothing (remoting.Mode.KeepsNothing);
// a caller done with a response may release it (consumer.PullEach does).
// In a build with the race detector the frame is zeroed first, so a
// reference kept in breach of this reads zeros, or races.
func (c *Command) Release() {
	c.releaseExt()
	if c.recycler == nil {
		return
	}
	f, r := c.frame, c.recycler
	c.frame, c.recycler, c.Body = nil, nil, nil
	if raceEnabled {
		clear(f)
	}
	r.RecycleFrame(f)
}
