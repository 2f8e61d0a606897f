//go:build !linux

package commitlog

import (
	"errors"
	"os"
)

var errPopulateUnsupported = errors.New("populate unsupported")

// mapFile is unsupported here: the engine writes with pwrite instead.
func mapFile(*os.File, int64, int) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapFile([]byte) error { return nil }

func populate([]byte) error { return errPopulateUnsupported }

func release([]byte) error { return nil }
