//go:build !unix

package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir opens <dir>/lock; elsewhere than Unix it does not lock.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("commitlog: lock %s: %w", dir, err)
	}
	return f, nil
}
