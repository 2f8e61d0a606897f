package pebblestore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quivermq/quiver/core/config"
)

// Defaults of the storage.pebble section, sized for a small device: with
// them a loaded broker keeps about memtable_size × 2 (the active memtable
// and one being flushed) + block_cache_size of Pebble memory.
const (
	DefaultMemTableSize             = 4 << 20
	DefaultBlockCacheSize           = 8 << 20
	DefaultMaxConcurrentCompactions = 1
	DefaultMaxOpenFiles             = 256
	DefaultL0CompactionThreshold    = 4
	DefaultL0StopWritesThreshold    = 12
	DefaultCompression              = "fastest"
)

// compressions maps the compression setting to Pebble's profiles.
var compressions = map[string]pebble.DBCompressionSettings{
	"none":     pebble.DBCompressionNone,
	"fastest":  pebble.DBCompressionFastest,
	"balanced": pebble.DBCompressionBalanced,
	"good":     pebble.DBCompressionGood,
}

// Config is the storage.pebble section.
type Config struct {
	// MemTableSize is the size of one memtable (default 4MiB, at least
	// 256KiB). Writes go to the memtable and the WAL; a full memtable is
	// flushed to an sstable in the background. A batch above half of it
	// (a large Append) is flushed on its own.
	MemTableSize config.ByteSize `koanf:"memtable_size"`
	// BlockCacheSize is the cache of uncompressed sstable blocks
	// (default 8MiB). Reads of recent messages are served from the
	// memtable; older ones from this cache or the page cache.
	BlockCacheSize config.ByteSize `koanf:"block_cache_size"`
	// MaxConcurrentCompactions bounds background compactions (default 1,
	// the right value for a device with one or two cores).
	MaxConcurrentCompactions int `koanf:"max_concurrent_compactions"`
	// MaxOpenFiles is a soft limit on the files Pebble keeps open
	// (default 256).
	MaxOpenFiles int `koanf:"max_open_files"`
	// L0CompactionThreshold is the number of L0 sublevels that triggers a
	// compaction (default 4).
	L0CompactionThreshold int `koanf:"l0_compaction_threshold"`
	// L0StopWritesThreshold is the number of L0 sublevels at which writes
	// stall until compactions catch up (default 12).
	L0StopWritesThreshold int `koanf:"l0_stop_writes_threshold"`
	// Compression of sstable blocks: none, fastest (default; Snappy-class),
	// balanced or good (zstd on the bottom levels: smaller on disk, more
	// CPU per read). The WAL and memtable are not compressed.
	Compression string `koanf:"compression"`

	// FS replaces the file system (tests only: vfs.NewCrashableMem to
	// simulate crashes, fault injection). Nil is the OS file system.
	FS vfs.FS `koanf:"-"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{
		MemTableSize:             DefaultMemTableSize,
		BlockCacheSize:           DefaultBlockCacheSize,
		MaxConcurrentCompactions: DefaultMaxConcurrentCompactions,
		MaxOpenFiles:             DefaultMaxOpenFiles,
		L0CompactionThreshold:    DefaultL0CompactionThreshold,
		L0StopWritesThreshold:    DefaultL0StopWritesThreshold,
		Compression:              DefaultCompression,
	}
}

// Validate checks the values, reporting every problem with its key.
func (c *Config) Validate() error {
	var errs []error
	if c.MemTableSize < 256<<10 || c.MemTableSize >= 4<<30 {
		errs = append(errs, fmt.Errorf("memtable_size: %s is outside [256KiB, 4GiB)", c.MemTableSize))
	}
	if c.BlockCacheSize < 0 {
		errs = append(errs, fmt.Errorf("block_cache_size: %s is negative", c.BlockCacheSize))
	}
	if c.MaxConcurrentCompactions < 1 {
		errs = append(errs, fmt.Errorf("max_concurrent_compactions: %d is below 1", c.MaxConcurrentCompactions))
	}
	if c.MaxOpenFiles < 16 {
		errs = append(errs, fmt.Errorf("max_open_files: %d is below 16", c.MaxOpenFiles))
	}
	if c.L0CompactionThreshold < 1 {
		errs = append(errs, fmt.Errorf("l0_compaction_threshold: %d is below 1", c.L0CompactionThreshold))
	}
	if c.L0StopWritesThreshold < c.L0CompactionThreshold {
		errs = append(errs, fmt.Errorf("l0_stop_writes_threshold: %d is below l0_compaction_threshold %d", c.L0StopWritesThreshold, c.L0CompactionThreshold))
	}
	if _, ok := compressions[c.Compression]; !ok {
		errs = append(errs, fmt.Errorf("compression: %q is not one of none, fastest, balanced, good", c.Compression))
	}
	return errors.Join(errs...)
}
