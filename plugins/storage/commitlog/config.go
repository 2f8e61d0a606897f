package commitlog

import (
	"errors"
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/config"
)

// Defaults and bounds of the storage.commitlog section.
const (
	// DefaultSegmentSize is the size of one commit-log segment file (RocketMQ
	// mapedFileSizeCommitLog).
	DefaultSegmentSize = 1 << 30
	// MinConfigSegmentSize is the smallest segment_size the configuration
	// accepts. Open accepts down to minSegmentSize for tests.
	MinConfigSegmentSize = 1 << 20
	// DefaultCQEntriesPerFile is the number of 20-byte entries in one
	// consume-queue file (RocketMQ mapedFileSizeConsumeQueue / 20).
	DefaultCQEntriesPerFile = 300000
	// DefaultScrubInterval and DefaultScrubRate pace the background scrub.
	DefaultScrubInterval = 24 * time.Hour
	DefaultScrubRate     = 16 << 20
)

// Config is the storage.commitlog section.
type Config struct {
	// SegmentSize is the fixed size of a commit-log segment file
	// (default 1GiB, at least 1MiB). A message never spans two segments.
	// It must not change once a store has data.
	SegmentSize config.ByteSize `koanf:"segment_size"`
	// CQEntriesPerFile is the number of entries in one consume-queue file
	// (default 300000). It must not change once a store has data.
	CQEntriesPerFile int `koanf:"cq_entries_per_file"`
	// KeyIndex keeps an in-memory index of UNIQ_KEY and KEYS for
	// QueryByKey (default true). It is rebuilt by scanning the whole commit
	// log on open; turn it off to open large stores quickly.
	KeyIndex bool `koanf:"key_index"`
	// ScrubInterval is how often the background scrub reads the whole log,
	// checking every record's checksum and consume-queue entry (default
	// 24h; 0 turns it off). The first pass starts one interval after open.
	ScrubInterval time.Duration `koanf:"scrub_interval"`
	// ScrubRate bounds the background scrub's reading, per second
	// (default 16MiB).
	ScrubRate config.ByteSize `koanf:"scrub_rate"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{SegmentSize: DefaultSegmentSize, CQEntriesPerFile: DefaultCQEntriesPerFile, KeyIndex: true,
		ScrubInterval: DefaultScrubInterval, ScrubRate: DefaultScrubRate}
}

// Validate checks the values, reporting every problem with its key.
func (c *Config) Validate() error {
	var errs []error
	if c.SegmentSize < MinConfigSegmentSize {
		errs = append(errs, fmt.Errorf("segment_size: %s is below %s", c.SegmentSize, config.ByteSize(MinConfigSegmentSize)))
	}
	if c.CQEntriesPerFile < 1000 {
		errs = append(errs, fmt.Errorf("cq_entries_per_file: %d is below 1000", c.CQEntriesPerFile))
	}
	if c.ScrubInterval < 0 {
		errs = append(errs, fmt.Errorf("scrub_interval: %s is negative", c.ScrubInterval))
	}
	if c.ScrubInterval > 0 && c.ScrubRate < 1<<20 {
		errs = append(errs, fmt.Errorf("scrub_rate: %s is below 1MiB (per second)", c.ScrubRate))
	}
	return errors.Join(errs...)
}
