// Package retention runs a store's clean-up: every CheckInterval it deletes
// what is older than Retention when the hour is one of CleanAt, and, at any
// hour, deletes oldest data first while the disk holding the store is used
// above MaxUsedRatio. Deletion is the store's DeleteBefore (whole segments
// for the CommitLog engine), so consume queues, indexes and min offsets
// follow, and consumers behind them are told PULL_OFFSET_MOVED.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quivermq/quiver/core/store"
)

// Config says when data may go.
type Config struct {
	// Retention is how long messages are kept (RocketMQ fileReservedTime).
	Retention time.Duration
	// CleanAt are the hours (0–23) at which expired data is deleted
	// (RocketMQ deleteWhen "04"); empty means at any hour.
	CleanAt []int
	// MaxUsedRatio of the disk triggers deleting oldest data first, at any
	// hour, whatever its age; 0 disables it.
	MaxUsedRatio float64
	// Dir is where the store keeps its files (for the disk check).
	Dir string
	// CheckInterval is how often to look (default 10s).
	CheckInterval time.Duration
}

// ParseHours reads RocketMQ's deleteWhen form: "04", "04;16", "1,13".
func ParseHours(s string) ([]int, error) {
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		h, err := strconv.Atoi(f)
		if err != nil || h < 0 || h > 23 {
			return nil, fmt.Errorf("retention: %q is not an hour 0..23", f)
		}
		out = append(out, h)
	}
	return out, nil
}

// Cleaner runs the clean-up loop.
type Cleaner struct {
	st  store.Store
	cfg Config
	log *slog.Logger
	now func() time.Time
	// usage reports the used ratio of the disk holding dir.
	usage func(dir string) (float64, error)

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards cfg.Retention and cfg.CleanAt, which SetSchedule changes
	// while the loop runs.
	mu sync.Mutex
}

// Schedule returns the retention and clean hours in force.
func (c *Cleaner) Schedule() (time.Duration, []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Retention, append([]int(nil), c.cfg.CleanAt...)
}

// SetSchedule changes the retention and clean hours of a running cleaner
// (RocketMQ's fileReservedTime and deleteWhen, changed at run time by
// UPDATE_BROKER_CONFIG); the next check uses them.
func (c *Cleaner) SetSchedule(retention time.Duration, cleanAt []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Retention, c.cfg.CleanAt = retention, append([]int(nil), cleanAt...)
}

// New returns a cleaner for st; Start runs it.
func New(st store.Store, cfg Config, log *slog.Logger) *Cleaner {
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 10 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cleaner{st: st, cfg: cfg, log: log, now: time.Now, usage: DiskUsage}
}

// Start runs the loop in the background until Stop.
func (c *Cleaner) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(c.cfg.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.RunOnce(ctx)
			}
		}
	}()
}

// Stop ends the loop and waits for it.
func (c *Cleaner) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// RunOnce performs one check; it returns the bytes freed.
func (c *Cleaner) RunOnce(ctx context.Context) int64 {
	now := c.now()
	var freed int64
	retention, cleanAt := c.Schedule()
	if retention > 0 && cleanHour(now, cleanAt) {
		n, err := c.st.DeleteBefore(ctx, now.Add(-retention))
		if err != nil {
			c.log.Warn("retention: delete expired", "err", err)
		}
		freed += n
	}
	if c.cfg.MaxUsedRatio > 0 && c.cfg.Dir != "" {
		// Oldest first: move the cut forward until enough is freed or
		// nothing more can go (the store never deletes its active data).
		span := retention
		if span <= 0 {
			span = 72 * time.Hour
		}
		for i := 0; i < 16; i++ {
			ratio, err := c.usage(c.cfg.Dir)
			if err != nil {
				c.log.Warn("retention: disk usage", "dir", c.cfg.Dir, "err", err)
				break
			}
			if ratio <= c.cfg.MaxUsedRatio {
				break
			}
			span /= 2
			n, err := c.st.DeleteBefore(ctx, now.Add(-span))
			if err != nil {
				c.log.Warn("retention: delete for disk space", "err", err)
				break
			}
			freed += n
			if n > 0 {
				c.log.Warn("retention: disk above its limit, deleted oldest data", "used", ratio, "limit", c.cfg.MaxUsedRatio, "freed", n, "cut", now.Add(-span))
			}
			if span < time.Minute {
				break
			}
		}
	}
	if freed > 0 {
		c.log.Info("retention: freed", "bytes", freed)
	}
	return freed
}

func cleanHour(now time.Time, cleanAt []int) bool {
	if len(cleanAt) == 0 {
		return true
	}
	for _, h := range cleanAt {
		if now.Hour() == h {
			return true
		}
	}
	return false
}

// DiskUsage is the used fraction of the file system holding dir, as
// RocketMQ's UtilAll.getDiskPartitionSpaceUsedPercent reads it (and df's
// Use%): see UsedRatio.
func DiskUsage(dir string) (float64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("retention: statfs %s: %w", dir, err)
	}
	return UsedRatio(uint64(st.Blocks), uint64(st.Bfree), uint64(st.Bavail)), nil
}

// UsedRatio is the used blocks over the blocks a writer could fill (used
// plus available), rounded up to a whole percent as Java rounds it.
// Blocks reserved for root (free, not available) count as neither: read
// as used (1 - available/total), a file system with a large reserve
// looked full and retention deleted everything older than half a minute
// (this machine: 38 % used by df, 0.77 that way, above the 0.75 default).
func UsedRatio(blocks, free, avail uint64) float64 {
	used := blocks - min(free, blocks)
	entire := used + avail
	if entire == 0 {
		return 0
	}
	pct := used * 100 / entire
	if used*100%entire != 0 {
		pct++
	}
	return float64(pct) / 100
}
