package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
)

// minMemoryLimit is the smallest process.memory_limit accepted: below it
// the collector would run almost continuously for the broker's working set.
const minMemoryLimit = 8 << 20

// processConfig is the process section: settings of the Go runtime a
// server process (namesrv, broker, dev) applies before it starts.
type processConfig struct {
	// MemoryLimit is the Go runtime's soft memory limit
	// (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets): the collector
	// runs more often as the runtime's memory nears it instead of letting
	// the heap grow to twice the live data (GOGC). It covers the Go heap,
	// stacks and runtime structures — with CGO_ENABLED=0 builds also
	// Pebble's memtables and block cache — but not mapped files (the
	// binary's text, CommitLog segments). 0 leaves the runtime's limit as
	// it is (GOMEMLIMIT, or none); a value here wins over GOMEMLIMIT.
	MemoryLimit config.ByteSize `koanf:"memory_limit"`
}

// processSection decodes and checks the process section.
var processSection = kernel.Section{Key: "process", Decode: func(c *config.Config) (any, error) {
	pc := &processConfig{}
	if err := c.Decode("process", pc); err != nil {
		return pc, err
	}
	if pc.MemoryLimit != 0 && pc.MemoryLimit < minMemoryLimit {
		return pc, fmt.Errorf("process.memory_limit: %s is below %s (0 leaves the Go runtime's limit)", pc.MemoryLimit, config.ByteSize(minMemoryLimit))
	}
	return pc, nil
}}

// applyProcess applies the process section to the running process and
// logs what it set.
func applyProcess(pc *processConfig, log *slog.Logger) {
	if pc == nil || pc.MemoryLimit == 0 {
		return
	}
	debug.SetMemoryLimit(int64(pc.MemoryLimit))
	args := []any{"memory_limit", pc.MemoryLimit.String()}
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		args = append(args, "overrides_GOMEMLIMIT", env)
	}
	log.Info("process: Go memory limit set", args...)
}
