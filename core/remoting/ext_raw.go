package remoting

import "sync"

// Requests decoded without their header map. A Router marks the codes
// whose handlers read extFields through a typed decoder (DeferExt: the
// broker's SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE); when no
// interceptor or answer filter of the router may read the ExtFields map
// (Router.Use), a Peer decodes such requests (DecodeFor) with the same
// checks as for the map but keeps the entries as byte ranges of the
// received header, in header order, instead of building the map. The
// handler reads them with RawExtFields. Ext, ReadExt, SetExt, ExtMap and
// the encoders build the map on first use (ensureExtMap); the field
// ExtFields stays nil until then. Release drops the entries with the
// frame they point into.

// RawField is one extFields entry of a request decoded without its map:
// its key and value, unescaped. Value is nil for a JSON null (the key is
// then absent, as if removed) and non-nil for an empty string.
type RawField struct{ Key, Value []byte }

// rawExt is a pooled list of RawFields.
type rawExt struct{ fields []RawField }

var rawExtPool = sync.Pool{New: func() any { return &rawExt{fields: make([]RawField, 0, extMapSize)} }}

func getRawExt() *rawExt { return rawExtPool.Get().(*rawExt) }

func putRawExt(r *rawExt) {
	if cap(r.fields) > 4*extMapSize {
		return // an odd request grew it
	}
	clear(r.fields) // no references into a recycled frame
	r.fields = r.fields[:0]
	rawExtPool.Put(r)
}

// litTrue and litFalse are the values of JSON true and false (read-only).
var litTrue, litFalse = []byte("true"), []byte("false")

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

// ensureExtMap builds c's ExtFields map from entries kept without one, as
// the decoder would have built it.
func (c *Command) ensureExtMap() {
	r := c.raw
	if r == nil {
		return
	}
	c.raw = nil
	m := getExtMap()
	for _, f := range r.fields {
		k := internBytes(f.Key)
		if f.Value == nil {
			delete(m, k) // null: absent, as Java's header decoding sees it
			continue
		}
		m[k] = internBytes(f.Value)
	}
	putRawExt(r)
	c.ExtFields, c.pooledExt = m, true
}

// releaseRaw drops entries kept without a map.
func (c *Command) releaseRaw() {
	if r := c.raw; r != nil {
		c.raw = nil
		putRawExt(r)
	}
}

// extDeferrer is a request handler that may take requests of some codes
// without their header map (Router, DeferExt).
type extDeferrer interface{ deferExt(code int32) bool }

// deferrableCode reports the request codes a Router may defer: those whose
// maps are pooled, so that a map built late goes back to the pool too.
func deferrableCode(code int32) bool {
	switch code {
	case SendMessage, SendMessageV2, SendBatchMessage:
		return true
	}
	return false
}

// wantsRaw reports whether d takes requests of code without their map.
func wantsRaw(d extDeferrer, code int32) bool {
	return d != nil && deferrableCode(code) && d.deferExt(code)
}

// DecodeFor decodes a frame as Decode does, for a Peer serving h: when h
// is a Router that takes requests of the frame's code without their header
// map (Router.DeferExt), the map is not built and the handler reads the
// entries with RawExtFields. What is accepted and refused is Decode's.
func DecodeFor(frame []byte, h Handler) (*Command, error) {
	d, _ := h.(extDeferrer)
	return decode(frame, d)
}
