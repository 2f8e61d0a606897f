package pebblestore

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
)

// TestKernelOpenStore goes through the kernel's config path: strict
// decoding of storage.pebble into NewConfig, Validate, then Open.
func TestKernelOpenStore(t *testing.T) {
	spec := kernel.Spec{Plugins: kernel.Plugins{Storage: []store.Provider{NewProvider()}}}
	tests := []struct {
		name    string
		give    map[string]any
		wantErr string
	}{
		{"defaults", map[string]any{}, ""},
		{"sizes as text", map[string]any{"memtable_size": "2MiB", "block_cache_size": "16MiB", "max_open_files": "64",
			"max_concurrent_compactions": 2, "l0_compaction_threshold": 2, "l0_stop_writes_threshold": 8}, ""},
		{"unknown key", map[string]any{"memtable_sise": "2MiB"}, "storage.pebble.memtable_sise"},
		{"too small", map[string]any{"memtable_size": "64KiB"}, "memtable_size"},
		{"compression", map[string]any{"compression": "lz4"}, "compression"},
		{"thresholds", map[string]any{"l0_compaction_threshold": 8, "l0_stop_writes_threshold": 4}, "l0_stop_writes_threshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cfg := config.FromMap(map[string]any{"storage": map[string]any{
				"engine": "pebble", "dir": dir, "flush": "sync", "pebble": tt.give,
			}})
			st, err := kernel.OpenStore(bg, cfg, spec, testLogger(t))
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			_, err = st.Append(bg, []store.Message{msg("Kernel", 0, "x")})
			assert.NoError(t, err)
			require.NoError(t, st.Close())
		})
	}
}

func TestConfigDecode(t *testing.T) {
	c := NewConfig()
	cfg := config.FromMap(map[string]any{"storage": map[string]any{"pebble": map[string]any{
		"memtable_size": "8MiB", "block_cache_size": "32MiB", "max_concurrent_compactions": "2",
		"max_open_files": 500, "l0_compaction_threshold": 2, "l0_stop_writes_threshold": 10, "compression": "good",
	}}})
	require.NoError(t, cfg.Decode("storage.pebble", c))
	assert.Equal(t, &Config{MemTableSize: 8 << 20, BlockCacheSize: 32 << 20, MaxConcurrentCompactions: 2,
		MaxOpenFiles: 500, L0CompactionThreshold: 2, L0StopWritesThreshold: 10, Compression: "good"}, c)
	assert.NoError(t, c.Validate())
	bad := &Config{}
	err := bad.Validate()
	for _, key := range []string{"memtable_size", "max_concurrent_compactions", "max_open_files", "l0_compaction_threshold", "compression"} {
		assert.ErrorContains(t, err, key)
	}
}
