package remoting

import (
	"fmt"
	"strconv"
	"strings"
)

// HeaderError names a missing or malformed custom header field. It reaches
// the client as the remark of a SYSTEM_ERROR, as Java does.
type HeaderError struct {
	Field  string
	Value  string
	Reason string
}

func (e *HeaderError) Error() string {
	if e.Value == "" && e.Reason == "missing" {
		return fmt.Sprintf("the custom field <%s> is null", e.Field)
	}
	return fmt.Sprintf("the custom field <%s> has bad value %q: %s", e.Field, e.Value, e.Reason)
}

// Ext reads typed extFields, keeping the first error.
type Ext struct {
	c   *Command
	Err error
}

// ReadExt starts reading c's extFields.
func ReadExt(c *Command) *Ext { return &Ext{c: c} }

func (e *Ext) get(k string) (string, bool) { return e.c.LookupExt(k) }

func (e *Ext) fail(err *HeaderError) {
	if e.Err == nil {
		e.Err = err
	}
}

// String returns a required string field.
func (e *Ext) String(k string) string {
	v, ok := e.get(k)
	if !ok {
		e.fail(&HeaderError{Field: k, Reason: "missing"})
	}
	return v
}

// OptString returns an optional string field.
func (e *Ext) OptString(k string) string { v, _ := e.get(k); return v }

// Int64 returns a required integer field.
func (e *Ext) Int64(k string) int64 { return e.int(k, 64, 0, true) }

// OptInt64 returns an optional integer field, def when absent or empty.
func (e *Ext) OptInt64(k string, def int64) int64 { return e.int(k, 64, def, false) }

// Int32 returns a required 32-bit integer field.
func (e *Ext) Int32(k string) int32 { return int32(e.int(k, 32, 0, true)) }

// OptInt32 returns an optional 32-bit integer field.
func (e *Ext) OptInt32(k string, def int32) int32 { return int32(e.int(k, 32, int64(def), false)) }

// int reads an integer field of bits bits: def when it is absent (an
// error when required) or empty and optional.
func (e *Ext) int(k string, bits int, def int64, required bool) int64 {
	v, ok := e.get(k)
	if !ok && required {
		e.fail(&HeaderError{Field: k, Reason: "missing"})
		return 0
	}
	if !ok || (v == "" && !required) {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	if err != nil {
		reason := "not an integer"
		if bits == 32 {
			reason = "not a 32-bit integer"
		}
		e.fail(&HeaderError{Field: k, Value: v, Reason: reason})
	}
	return n
}

// Bool returns an optional boolean field ("true" is true, as Java parses).
func (e *Ext) Bool(k string) bool {
	v, _ := e.get(k)
	return strings.EqualFold(strings.TrimSpace(v), "true")
}
