package plugin_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/plugin"
)

type conf struct{ N int }

var errSeam = errors.New("seam: bad argument")

func defaults() *conf { return &conf{N: 7} }

func TestConfig(t *testing.T) {
	mine := &conf{N: 3}
	tests := []struct {
		name    string
		give    any
		want    *conf
		wantErr string
	}{
		{"nil means the defaults", nil, &conf{N: 7}, ""},
		{"a nil *C means the defaults", (*conf)(nil), &conf{N: 7}, ""},
		{"the right type is passed through", mine, mine, ""},
		{"a value instead of a pointer", conf{N: 3}, nil, "storage.x: config is plugin_test.conf, want *plugin_test.conf: seam: bad argument"},
		{"another type", &struct{}{}, nil, "storage.x: config is *struct {}, want *plugin_test.conf: seam: bad argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plugin.Config("storage.x", tt.give, defaults, errSeam)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				assert.ErrorIs(t, err, errSeam)
				assert.Nil(t, got)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tt.want, got)
			if tt.give == mine {
				assert.Same(t, mine, got, "no copy")
			}
		})
	}
}
