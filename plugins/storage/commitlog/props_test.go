package commitlog

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/message"
)

func TestAppendPropsMatchesAppendEncoded(t *testing.T) {
	tests := []message.Properties{
		nil,
		{},
		{"TAGS": "t"},
		{"TAGS": "t", "KEYS": "a b", "UNIQ_KEY": "C0A8", "": "x", "EMPTY": ""},
		{"b": "1", "a": "2", "c": "3", "aa": "4", "A": "5"},
	}
	big := message.Properties{}
	for i := 0; i < 40; i++ {
		big[fmt.Sprint("k", i)] = fmt.Sprint(i)
	}
	tests = append(tests, big)
	for i, give := range tests {
		want := give.AppendEncoded([]byte("x"))
		assert.Equal(t, string(want), string(appendProps([]byte("x"), give)), "case %d", i)
	}
	p := message.Properties{"TAGS": "t", "UNIQ_KEY": "C0A8000100002A9F0000000000000000"}
	buf := make([]byte, 0, 128)
	assert.Zero(t, testing.AllocsPerRun(100, func() { buf = appendProps(buf[:0], p) }))
}
