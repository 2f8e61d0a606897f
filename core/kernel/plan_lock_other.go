//go:build !unix

package kernel

import (
	"fmt"

	"github.com/quivermq/quiver/core/durable"
)

// lockDir only creates dir where flock is unavailable; the engines lock
// their own files.
func lockDir(dir string) (unlock func(), err error) {
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create %s: %w", dir, err)
	}
	return func() {}, nil
}
