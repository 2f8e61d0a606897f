package kernel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
)

func engines(ids ...string) []store.Provider {
	out := make([]store.Provider, len(ids))
	for i, id := range ids {
		out[i] = &fakeEngine{id: id}
	}
	return out
}

func TestNewRegistrySorts(t *testing.T) {
	reg, err := kernel.NewRegistry("storage engine", engines("pebble", "memory", "commitlog"), store.Provider.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"commitlog", "memory", "pebble"}, reg.IDs())

	ids := reg.IDs()
	ids[0] = "mutated"
	assert.Equal(t, "commitlog", reg.IDs()[0], "IDs returns a copy")

	p, err := reg.Get("memory")
	require.NoError(t, err)
	assert.Equal(t, "memory", p.ID())
}

func TestNewRegistryErrors(t *testing.T) {
	tests := []struct {
		name string
		give []store.Provider
		want string
	}{
		{
			name: "duplicate names both types",
			give: []store.Provider{&fakeEngine{id: "commitlog"}, &otherEngine{fakeEngine{id: "commitlog"}}},
			want: `kernel: storage engine plugin "commitlog" registered twice (*kernel_test.fakeEngine and *kernel_test.otherEngine)`,
		},
		{
			name: "empty ID",
			give: engines("pebble", ""),
			want: `kernel: a storage engine plugin has an empty ID (*kernel_test.fakeEngine)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kernel.NewRegistry("storage engine", tt.give, store.Provider.ID)
			require.Error(t, err)
			assert.EqualError(t, err, tt.want)
		})
	}
}

func TestRegistryGetUnknown(t *testing.T) {
	tests := []struct {
		name string
		give []store.Provider
		want string
	}{
		{name: "lists registered", give: engines("pebble", "commitlog"), want: `unknown storage engine "pebel" (registered: commitlog, pebble)`},
		{name: "none registered", give: nil, want: `unknown storage engine "pebel" (none registered)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := kernel.NewRegistry("storage engine", tt.give, store.Provider.ID)
			require.NoError(t, err)
			p, err := reg.Get("pebel")
			assert.EqualError(t, err, tt.want)
			assert.Nil(t, p)
		})
	}
}
