package remoting_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

func TestReadExt(t *testing.T) {
	c := &remoting.Command{ExtFields: map[string]string{
		"s": "str", "i": " 42 ", "big": "9223372036854775807", "bad": "x1", "b": "TRUE", "i32": "2147483648", "empty": "",
	}}
	e := remoting.ReadExt(c)
	assert.Equal(t, "str", e.String("s"))
	assert.Equal(t, int64(42), e.Int64("i"))
	assert.Equal(t, int64(9223372036854775807), e.Int64("big"))
	assert.Equal(t, int32(42), e.Int32("i"))
	assert.Equal(t, int64(7), e.OptInt64("missing", 7))
	assert.Equal(t, int64(7), e.OptInt64("empty", 7))
	assert.Equal(t, int32(8), e.OptInt32("missing", 8))
	assert.Equal(t, "", e.OptString("missing"))
	assert.True(t, e.Bool("b"))
	assert.False(t, e.Bool("missing"))
	require.NoError(t, e.Err)

	tests := []struct {
		name string
		read func(*remoting.Ext)
		want string
	}{
		{"missing string", func(e *remoting.Ext) { e.String("nope") }, "the custom field <nope> is null"},
		{"missing int", func(e *remoting.Ext) { e.Int64("nope") }, "the custom field <nope> is null"},
		{"missing int32", func(e *remoting.Ext) { e.Int32("nope") }, "the custom field <nope> is null"},
		{"bad int", func(e *remoting.Ext) { e.Int64("bad") }, `the custom field <bad> has bad value "x1": not an integer`},
		{"bad opt int", func(e *remoting.Ext) { e.OptInt64("bad", 0) }, `the custom field <bad> has bad value "x1": not an integer`},
		{"int32 overflow", func(e *remoting.Ext) { e.Int32("i32") }, `the custom field <i32> has bad value "2147483648": not a 32-bit integer`},
		{"opt int32 overflow", func(e *remoting.Ext) { e.OptInt32("i32", 0) }, `the custom field <i32> has bad value "2147483648": not a 32-bit integer`},
		{"first error kept", func(e *remoting.Ext) { e.String("first"); e.Int64("bad") }, "the custom field <first> is null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := remoting.ReadExt(c)
			tt.read(e)
			require.Error(t, e.Err)
			assert.Equal(t, tt.want, e.Err.Error())
			var he *remoting.HeaderError
			assert.ErrorAs(t, e.Err, &he)
		})
	}
}
