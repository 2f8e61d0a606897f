package pebblestore

import (
	"fmt"
	"runtime"

	"github.com/quivermq/quiver/core/store"
)

// unalignedArches are the GOARCH values Pebble cannot run on: Pebble
// v2.1.7's columnar blocks read 32- and 64-bit words through unsafe at
// 2- and 4-byte aligned addresses (sstable/colblk endian_little.go and
// endian_big.go, UnsafeOffsets.At2 among them), and MIPS has no unaligned
// loads. Under qemu-user the broker dies with SIGBUS at the first
// compaction, after a few thousand sends; a Linux kernel may emulate the
// loads (slowly) or deliver the same SIGBUS, depending on its
// unaligned_action. The commit-log engine runs there.
var unalignedArches = map[string]bool{"mips": true, "mipsle": true, "mips64": true, "mips64le": true}

// ErrUnsupportedArch is returned by Open on an architecture Pebble cannot
// run on (see unalignedArches).
var ErrUnsupportedArch = fmt.Errorf("pebblestore: unsupported architecture: %w", store.ErrBadArgument)

// checkArch refuses goarch when Pebble would crash there, naming the fix.
func checkArch(goarch string) error {
	if unalignedArches[goarch] {
		return fmt.Errorf("%w: storage.engine pebble cannot run on GOARCH=%s (Pebble reads unaligned words, which crash MIPS with SIGBUS); use storage.engine: commitlog", ErrUnsupportedArch, goarch)
	}
	return nil
}

// hostArch is the architecture Open checks (a variable for tests).
var hostArch = runtime.GOARCH
