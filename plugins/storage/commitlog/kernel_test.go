package commitlog

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
)

// TestKernelOpenStore goes through the kernel's config path: strict
// decoding of storage.commitlog into NewConfig, Validate, then Open.
func TestKernelOpenStore(t *testing.T) {
	spec := kernel.Spec{Plugins: kernel.Plugins{Storage: []store.Provider{NewProvider()}}}
	tests := []struct {
		name    string
		give    map[string]any
		wantErr string
	}{
		{"defaults", map[string]any{}, ""},
		{"sizes as text", map[string]any{"segment_size": "64MiB", "cq_entries_per_file": 1000, "key_index": "false"}, ""},
		{"unknown key", map[string]any{"segment_sise": "64MiB"}, "storage.commitlog.segment_sise"},
		{"too small", map[string]any{"segment_size": "64KiB"}, "segment_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cfg := config.FromMap(map[string]any{"storage": map[string]any{
				"engine": "commitlog", "dir": dir, "flush": "sync", "commitlog": tt.give,
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
	cfg := config.FromMap(map[string]any{"storage": map[string]any{"commitlog": map[string]any{
		"segment_size": "2GiB", "cq_entries_per_file": "600000", "key_index": false,
		"scrub_interval": "1h", "scrub_rate": "4MiB",
	}}})
	require.NoError(t, cfg.Decode("storage.commitlog", c))
	assert.Equal(t, &Config{SegmentSize: 2 << 30, CQEntriesPerFile: 600000, KeyIndex: false, ScrubInterval: time.Hour, ScrubRate: 4 << 20}, c)
	assert.NoError(t, c.Validate())
}
